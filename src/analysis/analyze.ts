import { ConfigError } from '../core/errors.js';
import { loadTrace, type Trace } from '../workload/trace.js';
import { simulateBelady, simulateUnboundedCache } from './belady.js';
import { buildOffloadBlockAccesses } from './offload-blocks.js';
import { labeledRows } from '../report/text-rows.js';
import { distancePercentile, reusesWithin, reuseDistances, type ReuseDistances } from './reuse-distance.js';

/**
 * `kvtier analyze`: what a trace offers a GPU prefix cache and a CPU tier,
 * before running it.
 *
 * The GPU+CPU optimum is Belady's MIN on offloaded-block accesses, counting
 * prefix hits (belady.ts), of one cache with no GPU tier in front. It is not
 * a bound of the CPU tier's hits: in a run the GPU prefix cache serves part
 * of these hits before the CPU tier sees them. It assumes:
 *   - no GPU tier in front: every prompt block is looked up in the one cache;
 *   - blocks of blockSize x offloadFactor tokens after token scaling; only a
 *     prompt's full blocks are stored or hit, and the last prompt token is
 *     always computed;
 *   - every full prompt block is stored once computed (store on compute) and
 *     output tokens are never reused (replayed outputs differ from the text
 *     the trace recorded), so output blocks are left out;
 *   - requests arrive one after another in trace order; loads and stores
 *     complete instantly.
 * The CPU tier's own bound needs a replay with a GPU tier in front
 * (`cpuTierBound`, which the command fills in when given a GPU pool).
 */

export interface AnalyzeOptions {
  readonly trace: string;
  /** CPU tier capacity in offloaded blocks. */
  readonly cpuBlocks: number;
  /** Tokens per GPU block (default 16). */
  readonly blockSize?: number;
  /** GPU blocks per offloaded block (default 1). */
  readonly offloadFactor?: number;
  readonly tokenScale?: number;
  readonly maxRequests?: number | null;
  /** Seconds into the trace, [start, end). */
  readonly timeWindow?: readonly [number, number] | null;
}

export interface TraceAnalysis {
  readonly trace: {
    readonly file: string;
    readonly requests: number;
    readonly promptTokens: number;
    readonly outputTokens: number;
    readonly tokenScale: number;
    /** From the first to the last arrival. */
    readonly spanSeconds: number;
  };
  readonly blocks: {
    /** Tokens per offloaded block: blockSize x offloadFactor (after token scaling). */
    readonly blockTokens: number;
    readonly blockSize: number;
    readonly offloadFactor: number;
    /** Full prompt blocks over all requests. */
    readonly accesses: number;
    readonly unique: number;
    /** Accesses to a block seen before: the hits of an infinite cache without the prefix rule. */
    readonly reusedAccesses: number;
    readonly reusePercent: number;
    /** Prefix hits of an infinite cache. */
    readonly infiniteCacheHitTokens: number;
    readonly infiniteCacheHitPercent: number;
  };
  readonly reuseDistance: {
    /** Distinct other offloaded blocks accessed between a block's use and its reuse. */
    readonly unit: 'blocks';
    readonly reuses: number;
    readonly p10: number | null;
    readonly p50: number | null;
    readonly p90: number | null;
    readonly p99: number | null;
    readonly max: number | null;
    /** Reuses at distance < cpuBlocks: what LRU of that size hits, ignoring the prefix rule. */
    readonly withinCapacity: number;
    readonly withinCapacityPercent: number;
    /** Reuses by distance: [from, to) in powers of two. */
    readonly histogram: readonly { readonly from: number; readonly to: number; readonly count: number }[];
  };
  /** One cache of cpuBlocks with no GPU tier in front: GPU prefix and CPU-tier hits together. */
  readonly gpuCpuOptimum: {
    readonly method: 'belady-min-prefix-hits-no-gpu-tier';
    readonly cpuBlocks: number;
    readonly hitBlocks: number;
    readonly hitTokens: number;
    /** Of all prompt tokens. */
    readonly hitPercentOfPrompt: number;
    /** Of the infinite cache's prefix hit tokens. */
    readonly percentOfInfinite: number;
  };
  /** The CPU tier's bound behind a GPU tier (null when no GPU pool was given). */
  readonly cpuTierBound: CpuTierBoundAnalysis | null;
  readonly assumptions: readonly string[];
}

/** What a CPU tier behind a GPU pool can hit on the slice, from one simulated replay. */
export interface CpuTierBoundAnalysis {
  readonly method: 'belady-min-bypass-behind-gpu-tier';
  readonly gpuBlocks: number;
  readonly cpuBlocks: number;
  /** Trace milliseconds per step of the replay the stream was recorded from. */
  /** The replay's clock (the sweep's default: modelled). */
  readonly clock: string;
  /** Belady's MIN with bypass over what the tier sees, each request's reuse counted once. */
  readonly hitTokens: number;
  /** A bound proven for every policy (MIN on a relaxed stream, whole blocks, capped by the ceiling): at least hitTokens. */
  readonly provenBoundTokens: number;
  /** An unbounded CPU tier over the same stream. */
  readonly ceilingHitTokens: number;
  readonly percentOfCeiling: number;
}

export const OPTIMUM_ASSUMPTIONS = [
  'Belady MIN on offloaded-block accesses, counting prefix hits (a strong heuristic; prefix-constrained hits make plain MIN not provably optimal)',
  'no GPU tier in front: every prompt block is looked up in the one cache, so its hits are GPU prefix and CPU-tier hits together',
  'blocks of blockSize x offloadFactor tokens after token scaling; only full prompt blocks are stored or hit; the last prompt token is always computed',
  'every full prompt block is stored once computed; output blocks are never reused and are left out',
  'requests in trace order, one at a time; transfers complete instantly',
] as const;

/** The trace slice the options name. */
export function loadAnalyzedTrace(options: AnalyzeOptions): Promise<Trace> {
  return loadTrace(options.trace, {
    tokenScale: options.tokenScale ?? 1,
    maxRequests: options.maxRequests ?? null,
    timeWindow: options.timeWindow ?? null,
  });
}

/** Loads the trace slice and analyzes it. */
export async function analyzeTrace(options: AnalyzeOptions): Promise<TraceAnalysis> {
  return analyzeLoadedTrace(await loadAnalyzedTrace(options), options);
}

export function analyzeLoadedTrace(
  trace: Trace,
  options: Pick<AnalyzeOptions, 'cpuBlocks' | 'blockSize' | 'offloadFactor'>,
): TraceAnalysis {
  const blockSize = options.blockSize ?? 16;
  const offloadFactor = options.offloadFactor ?? 1;
  requireCount('cpuBlocks', options.cpuBlocks, 0);
  requireCount('blockSize', blockSize, 1);
  requireCount('offloadFactor', offloadFactor, 1);
  const accesses = buildOffloadBlockAccesses(trace.records, trace.blockTokens, blockSize * offloadFactor);
  const unbounded = simulateUnboundedCache(accesses);
  const optimal = simulateBelady(accesses, options.cpuBlocks);
  const distances = reuseDistances(accesses);

  let promptTokens = 0;
  let outputTokens = 0;
  for (const record of trace.records) {
    promptTokens += record.inputLength;
    outputTokens += record.outputLength;
  }
  const records = trace.records;
  const spanMs = records.length === 0 ? 0 : records[records.length - 1].timestampMs - records[0].timestampMs;
  const total = accesses.blocks.length;
  const reused = total - accesses.uniqueBlocks;
  const withinCapacity = reusesWithin(distances, options.cpuBlocks);
  return {
    trace: { file: trace.file, requests: records.length, promptTokens, outputTokens, tokenScale: trace.tokenScale, spanSeconds: spanMs / 1000 },
    blocks: {
      blockTokens: accesses.blockTokens,
      blockSize,
      offloadFactor,
      accesses: total,
      unique: accesses.uniqueBlocks,
      reusedAccesses: reused,
      reusePercent: percent(reused, total),
      infiniteCacheHitTokens: unbounded.hitTokens,
      infiniteCacheHitPercent: percent(unbounded.hitTokens, promptTokens),
    },
    reuseDistance: {
      unit: 'blocks',
      reuses: distances.reuses,
      p10: distancePercentile(distances, 10),
      p50: distancePercentile(distances, 50),
      p90: distancePercentile(distances, 90),
      p99: distancePercentile(distances, 99),
      max: distancePercentile(distances, 100),
      withinCapacity,
      withinCapacityPercent: percent(withinCapacity, distances.reuses),
      histogram: powerOfTwoHistogram(distances),
    },
    gpuCpuOptimum: {
      method: 'belady-min-prefix-hits-no-gpu-tier',
      cpuBlocks: options.cpuBlocks,
      hitBlocks: optimal.hitBlocks,
      hitTokens: optimal.hitTokens,
      hitPercentOfPrompt: percent(optimal.hitTokens, promptTokens),
      percentOfInfinite: percent(optimal.hitTokens, unbounded.hitTokens),
    },
    cpuTierBound: null,
    assumptions: OPTIMUM_ASSUMPTIONS,
  };
}

function requireCount(name: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) throw new ConfigError(`analyze: ${name} ${value}: expected an integer >= ${min}`);
}

function percent(part: number, whole: number): number {
  return whole === 0 ? 0 : (100 * part) / whole;
}

/** Buckets [0,1), [1,2), [2,4), [4,8), ... up to the largest distance seen. */
function powerOfTwoHistogram(distances: ReuseDistances): { from: number; to: number; count: number }[] {
  const buckets: { from: number; to: number; count: number }[] = [];
  const { counts } = distances;
  let last = counts.length - 1;
  while (last >= 0 && counts[last] === 0) last--;
  for (let from = 0, to = 1; from <= last; from = to, to *= 2) {
    let count = 0;
    for (let d = from; d < to && d < counts.length; d++) count += counts[d];
    buckets.push({ from, to, count });
  }
  return buckets;
}

/** The analysis as a readable text block. */
export function formatAnalysis(analysis: TraceAnalysis): string {
  const { trace, blocks, reuseDistance: rd, gpuCpuOptimum: optimal, cpuTierBound: bound } = analysis;
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const pct = (x: number) => `${x.toFixed(1)}%`;
  const q = (x: number | null) => (x === null ? '-' : n(x));
  const rows: [string, string][] = [
    ['trace', `${trace.file}: ${n(trace.requests)} requests over ${trace.spanSeconds.toFixed(1)} s${trace.tokenScale === 1 ? '' : `, lengths / ${trace.tokenScale}`}`],
    ['tokens', `prompt ${n(trace.promptTokens)}   output ${n(trace.outputTokens)}`],
    ['blocks', `${n(blocks.accesses)} prompt blocks of ${blocks.blockTokens} tokens (block size ${blocks.blockSize} x offload factor ${blocks.offloadFactor}), ${n(blocks.unique)} unique`],
    ['reuse', `${pct(blocks.reusePercent)} of block accesses reuse a block; an infinite cache hits ${n(blocks.infiniteCacheHitTokens)} prompt tokens (${pct(blocks.infiniteCacheHitPercent)})`],
    ['reuse distance', `p10 ${q(rd.p10)}  p50 ${q(rd.p50)}  p90 ${q(rd.p90)}  p99 ${q(rd.p99)}  max ${q(rd.max)} blocks; ${pct(rd.withinCapacityPercent)} of reuses within ${n(optimal.cpuBlocks)} blocks`],
    ['GPU+CPU optimum', `${n(optimal.hitTokens)} tokens at ${n(optimal.cpuBlocks)} blocks: ${pct(optimal.hitPercentOfPrompt)} of prompt tokens, ${pct(optimal.percentOfInfinite)} of the infinite cache`],
  ];
  if (bound !== null) {
    rows.push(
      ['CPU tier bound', `${n(bound.hitTokens)} tokens at ${n(bound.cpuBlocks)} CPU blocks behind ${n(bound.gpuBlocks)} GPU blocks: ${pct(bound.percentOfCeiling)} of the ceiling`],
      ['CPU tier ceiling', `${n(bound.ceilingHitTokens)} tokens: an unbounded CPU tier behind the same GPU blocks`],
    );
    rows.push([
      'proven bound',
      bound.provenBoundTokens === bound.hitTokens
        ? 'the CPU tier bound is the optimum: it equals a bound no policy exceeds'
        : `${n(bound.provenBoundTokens)} tokens: no policy exceeds this`,
    ]);
  }
  const boundNote =
    bound === null
      ? [
          'The GPU+CPU optimum is one cache with no GPU tier in front: it counts GPU prefix hits and CPU-tier hits together and does not',
          'bound a CPU tier\'s hits. For the CPU tier\'s bound behind a GPU pool, give --gpu-blocks (or see kvtier sweep).',
        ]
      : [
          `The CPU tier bound is Belady MIN with bypass over the lookups and stores a CPU tier sees behind ${n(bound.gpuBlocks)} GPU blocks`,
          `(each request's reuse counted once), recorded from a simulated replay (clock: ${bound.clock}) of a tier`,
          'that stores every computed block and serves none; the ceiling is an unbounded CPU tier over the same stream. The proven bound',
          'is MIN with writes at any lookup, every held looked-up block counted, in whole blocks (capped by the ceiling).',
        ];
  return [labeledRows(rows), '', ...boundNote, '', 'The GPU+CPU optimum assumes:', ...analysis.assumptions.map((a) => `  - ${a}`)].join('\n');
}
