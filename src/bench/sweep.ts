import type { GpuProfileName } from '../timing/gpu-profiles.js';
import { analyzeLoadedTrace } from '../analysis/analyze.js';
import { ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { ConfigError, EngineError } from '../core/errors.js';
import { EVICTION_POLICY_NAMES } from '../config/eviction-policy-names.js';
import { parseStorePolicyName } from '../config/store-policy-name.js';
import type { EvictionPolicyName, StorePolicyName } from '../runtime/engine-types.js';
import { loadTrace, type Trace } from '../workload/trace.js';
import { checkArrivalSpan } from '../workload/trace-workload.js';
import { replay as replayOnEngine, runFailure } from './e2e.js';
import { replay as replaySimulated, replayGeometry, replaySliceOf, type PolicyConfiguration, type PolicyResult, type ReplaySlice } from './policies.js';
import { defaultReplayClock, describeReplayClock, fixedReplayClock, type ReplayClock } from './replay-clock.js';
import type { ReplayLoad } from '../report/replay-load.js';
import { cpuTierBounds, type CpuTierBoundPoint } from './cpu-tier-bound.js';

/**
 * A capacity x policy sweep: one trace slice replayed at every CPU-tier
 * capacity with every policy, each point set against the CPU tier's bound at
 * that capacity (cpu-tier-bound.ts: Belady over what the tier sees behind the
 * GPU tier, from one replay) and the unbounded tier's ceiling, beside the
 * GPU+CPU optimum of `kvtier analyze`, plus the slice's reuse-distance profile.
 *
 * The default mode replays through the Scheduler, the OffloadingConnector and
 * the production rank workers over simulated devices (as the policy
 * comparison does): fast, exact in hits
 * and prefill tokens, no timing. The engine mode runs the full Engine (ranks,
 * native transfers) per point and adds TTFT. Every point checks each
 * finished request against the reference model.
 */

/** A policy of the sweep: an eviction policy and a store policy. */
export interface SweepPolicy extends PolicyConfiguration {
  /** How the command line named it: 'lru', 'reuse:2', 's3fifo/on-evict'... */
  readonly label: string;
}


export interface SweepOptions {
  readonly traceFile: string;
  readonly maxRequests: number;
  readonly tokenScale: number;
  readonly gpuBlocks: number;
  /** CPU tier capacities, in offloaded blocks. */
  readonly cpuBlocks: readonly number[];
  readonly policies: readonly SweepPolicy[];
  readonly blockSize: number;
  readonly offloadFactor: number;
  /** Run the full engine per point (TTFT) instead of the simulated replay. */
  readonly engine?: { readonly backend: 'host' | 'cuda'; readonly tp: number; readonly speedup: number; readonly gpu?: GpuProfileName } | null;
  /**
   * Simulated replay: the clock (replay-clock.ts). Default: each step lasts
   * what the step clock prices for llama-8b on an H100, so the replay keeps
   * the trace's pace wherever such a deployment would.
   */
  readonly clock?: ReplayClock;
  /** Simulated replay: a fixed number of trace milliseconds per step instead of the modelled clock. */
  readonly traceMsPerStep?: number;
  /** Called after each point (e.g. a progress line). */
  readonly onPoint?: (point: SweepPoint, done: number, total: number) => void;
}

export interface SweepPoint {
  readonly policy: string;
  readonly eviction: EvictionPolicyName;
  readonly storePolicy: string;
  readonly cpuBlocks: number;
  /** Prompt tokens each tier served the first time their request reached them. */
  readonly cpuHitTokens: number;
  readonly gpuPrefixHitTokens: number;
  /** Tokens each tier served again to a preempted request that had reached them before: not hits. */
  readonly cpuRereadTokens: number;
  readonly gpuPrefixRereadTokens: number;
  /** Includes recomputedTokens: cpu + gpu hits + prefillTokensComputed = prompt tokens + recomputedTokens. */
  readonly prefillTokensComputed: number;
  readonly recomputedTokens: number;
  /** The CPU tier's bound at this capacity: Belady's hit tokens over the stream the tier sees behind the GPU tier. */
  readonly cpuTierBoundHitTokens: number;
  /** cpuHitTokens / cpuTierBoundHitTokens (0 when the bound is 0). */
  readonly shareOfCpuTierBound: number;
  /**
   * Belady's hit tokens of one cache of this capacity with no GPU tier in
   * front (`kvtier analyze`): GPU prefix and CPU-tier hits together, not a
   * bound of the CPU tier's hits.
   */
  readonly gpuCpuOptimalHitTokens: number;
  readonly requests: number;
  /** Finished requests whose tokens equal the reference model's. */
  readonly verified: number;
  readonly preemptions: number;
  /** Simulated mode: the replay's pace, queueing and latencies on its clock; null in the engine mode. */
  readonly load: ReplayLoad | null;
  /** Engine mode only. */
  readonly ttftP50Ms: number | null;
  readonly ttftP99Ms: number | null;
  readonly wallSeconds: number | null;
}

export interface SweepResult {
  readonly mode: 'simulated' | 'engine';
  /** Simulated replay with a fixed clock: trace milliseconds per engine step; else null. */
  readonly traceMsPerStep: number | null;
  /** Simulated replay: how its clock is kept (describeReplayClock); null in the engine mode. */
  readonly clock: string | null;
  readonly trace: { readonly file: string; readonly requests: number; readonly tokenScale: number; readonly promptTokens: number };
  readonly gpuBlocks: number;
  readonly blockSize: number;
  readonly offloadFactor: number;
  readonly cpuBlocks: readonly number[];
  readonly policies: readonly string[];
  /** The same slice without a CPU tier. */
  readonly baseline: {
    readonly gpuPrefixHitTokens: number;
    readonly prefillTokensComputed: number;
    readonly ttftP50Ms: number | null;
    /** Simulated mode: the baseline replay's pace and queueing. */
    readonly load: ReplayLoad | null;
  };
  /**
   * The CPU tier's bound per capacity: Belady's MIN with bypass over the
   * lookups and stores the tier sees behind the GPU tier, each request's
   * reuse counted once, from the simulated replay of a tier that stores
   * every computed block and serves none (cpu-tier-bound.ts; also in the
   * engine mode).
   */
  readonly cpuTierBound: readonly CpuTierBoundPoint[];
  /** An unbounded CPU tier's hit tokens over the same stream: no bound exceeds it. */
  readonly cpuTierCeilingHitTokens: number;
  /**
   * Belady's optimum per capacity of one cache with no GPU tier in front
   * (`kvtier analyze`): GPU prefix and CPU-tier hits together; and that
   * cache's hits when unbounded.
   */
  readonly gpuCpuOptimum: readonly { readonly cpuBlocks: number; readonly hitTokens: number }[];
  readonly gpuCpuInfiniteCacheHitTokens: number;
  /** Reuse distances of offloaded blocks: [from, to) in powers of two. */
  readonly reuseHistogram: readonly { readonly from: number; readonly to: number; readonly count: number }[];
  readonly points: readonly SweepPoint[];
  readonly elapsedSeconds: number;
}

const POLICY_PATTERN = /^([a-z0-9+]+)(?:\/(.+))?$/;

/**
 * Parses one policy name: an eviction policy ('lru', 'arc', 'lhd', 's3fifo';
 * stores on compute), 'reuse:K' (LRU storing blocks looked up K times), or
 * 'EVICTION/STORE' ('s3fifo/on-evict', 'arc/reuse:2').
 */
export function parseSweepPolicy(text: string): SweepPolicy {
  const trimmed = text.trim();
  if (/^reuse:/.test(trimmed)) {
    parseStorePolicyName(trimmed);
    return { label: trimmed, eviction: 'lru', storePolicy: trimmed };
  }
  const match = POLICY_PATTERN.exec(trimmed);
  const eviction = match?.[1];
  if (match === null || eviction === undefined || !(EVICTION_POLICY_NAMES as readonly string[]).includes(eviction)) {
    throw new ConfigError(
      `policy ${JSON.stringify(text)}: expected ${EVICTION_POLICY_NAMES.join(', ')}, reuse:K, or EVICTION/STORE (e.g. s3fifo/on-evict)`,
    );
  }
  const storePolicy = match[2] ?? ENGINE_DEFAULTS.storePolicy;
  parseStorePolicyName(storePolicy);
  return { label: trimmed, eviction: eviction as EvictionPolicyName, storePolicy };
}

export async function runSweep(options: SweepOptions): Promise<SweepResult> {
  const started = performance.now();
  if (options.cpuBlocks.length === 0) throw new ConfigError('sweep: no CPU capacities given');
  if (options.policies.length === 0) throw new ConfigError('sweep: no policies given');
  const trace = await loadTrace(options.traceFile, { maxRequests: options.maxRequests, tokenScale: options.tokenScale });
  // Refused before any point runs, by the rule every replay applies.
  if (options.engine != null) checkArrivalSpan(trace, options.engine.speedup);
  if (trace.records.length === 0) throw new ConfigError(`sweep: ${options.traceFile} holds no requests`);
  const kv = replayGeometry(options.blockSize, options.offloadFactor);
  const geometry = { blockSize: kv.blockSize, offloadFactor: kv.offloadFactor };
  const largest = Math.max(...options.cpuBlocks);
  const profile = analyzeLoadedTrace(trace, { cpuBlocks: largest, ...geometry });
  const gpuCpuOptimum = options.cpuBlocks.map((cpuBlocks) => ({
    cpuBlocks,
    hitTokens: cpuBlocks === largest ? profile.gpuCpuOptimum.hitTokens : analyzeLoadedTrace(trace, { cpuBlocks, ...geometry }).gpuCpuOptimum.hitTokens,
  }));

  const slice = replaySliceOf(trace);
  const clock = sweepClock(options);
  const bounds = await cpuTierBounds(slice, { gpuBlocks: options.gpuBlocks, clock, geometry: kv }, options.cpuBlocks);

  const run = options.engine == null ? simulatedRunner(options, slice, clock) : engineRunner(options, trace);
  const baseline = await run(null, 0);
  const points: SweepPoint[] = [];
  const total = options.cpuBlocks.length * options.policies.length;
  for (const [c, cpuBlocks] of options.cpuBlocks.entries()) {
    const bound = bounds.bound[c].hitTokens;
    for (const policy of options.policies) {
      const outcome = await run(policy, cpuBlocks);
      const point: SweepPoint = {
        policy: policy.label,
        eviction: policy.eviction,
        storePolicy: policy.storePolicy,
        cpuBlocks,
        ...outcome,
        cpuTierBoundHitTokens: bound,
        shareOfCpuTierBound: bound === 0 ? 0 : outcome.cpuHitTokens / bound,
        gpuCpuOptimalHitTokens: gpuCpuOptimum[c].hitTokens,
      };
      points.push(point);
      options.onPoint?.(point, points.length, total);
    }
  }
  return {
    mode: options.engine == null ? 'simulated' : 'engine',
    traceMsPerStep: options.engine == null && clock.kind === 'fixed' ? clock.msPerStep : null,
    clock: options.engine == null ? describeReplayClock(clock) : null,
    trace: {
      file: trace.file,
      requests: trace.records.length,
      tokenScale: trace.tokenScale,
      promptTokens: profile.trace.promptTokens,
    },
    gpuBlocks: options.gpuBlocks,
    blockSize: options.blockSize,
    offloadFactor: options.offloadFactor,
    cpuBlocks: [...options.cpuBlocks],
    policies: options.policies.map((p) => p.label),
    baseline: {
      gpuPrefixHitTokens: baseline.gpuPrefixHitTokens,
      prefillTokensComputed: baseline.prefillTokensComputed,
      ttftP50Ms: baseline.ttftP50Ms,
      load: baseline.load,
    },
    cpuTierBound: bounds.bound,
    cpuTierCeilingHitTokens: bounds.ceilingHitTokens,
    gpuCpuOptimum,
    gpuCpuInfiniteCacheHitTokens: profile.blocks.infiniteCacheHitTokens,
    reuseHistogram: profile.reuseDistance.histogram,
    points,
    elapsedSeconds: (performance.now() - started) / 1000,
  };
}

type PointOutcome = Pick<
  SweepPoint,
  | 'cpuHitTokens'
  | 'gpuPrefixHitTokens'
  | 'cpuRereadTokens'
  | 'gpuPrefixRereadTokens'
  | 'prefillTokensComputed'
  | 'recomputedTokens'
  | 'requests'
  | 'verified'
  | 'preemptions'
  | 'load'
  | 'ttftP50Ms'
  | 'ttftP99Ms'
  | 'wallSeconds'
>;

/** Runs one point: a policy at a capacity, or (policy null) the slice without a CPU tier. */
type PointRunner = (policy: SweepPolicy | null, cpuBlocks: number) => Promise<PointOutcome>;

/** The sweep's replay clock: a fixed step when asked for one, else the given or default modelled clock. */
function sweepClock(options: SweepOptions): ReplayClock {
  if (options.traceMsPerStep !== undefined) return fixedReplayClock(options.traceMsPerStep);
  return options.clock ?? defaultReplayClock();
}

function simulatedRunner(options: SweepOptions, slice: ReplaySlice, clock: ReplayClock): PointRunner {
  return async (policy, cpuBlocks) => {
    const replayOptions = { gpuBlocks: options.gpuBlocks, cpuBlocks: Math.max(1, cpuBlocks), geometry: replayGeometry(options.blockSize, options.offloadFactor), clock };
    const result: PolicyResult = await replaySimulated(replayOptions, slice.requests, slice.expected, policy, slice.positionSums);
    return {
      cpuHitTokens: result.cpuHitTokens,
      gpuPrefixHitTokens: result.gpuPrefixHitTokens,
      cpuRereadTokens: result.cpuRereadTokens,
      gpuPrefixRereadTokens: result.gpuPrefixRereadTokens,
      prefillTokensComputed: result.prefillTokensComputed,
      recomputedTokens: result.recomputedTokens,
      requests: result.requests,
      verified: result.verifiedRequests,
      preemptions: result.preemptions,
      load: result.load,
      ttftP50Ms: null,
      ttftP99Ms: null,
      wallSeconds: null,
    };
  };
}

function engineRunner(options: SweepOptions, trace: Trace): PointRunner {
  const engine = options.engine as NonNullable<SweepOptions['engine']>;
  return async (policy, cpuBlocks) => {
    const report = await replayOnEngine(
      {
        backend: engine.backend,
        traceFile: options.traceFile,
        maxRequests: options.maxRequests,
        tokenScale: options.tokenScale,
        speedup: engine.speedup,
        tp: engine.tp,
        ...(engine.gpu === undefined ? {} : { gpu: engine.gpu }),
        blockSize: options.blockSize,
        gpuBlocks: options.gpuBlocks,
        cpuBlocks: Math.max(1, cpuBlocks),
        offloadFactor: options.offloadFactor,
        eviction: policy?.eviction,
        storePolicy: policy?.storePolicy as StorePolicyName | undefined,
      },
      trace,
      policy !== null,
    );
    const failure = runFailure(report);
    if (failure !== null) throw new EngineError(`sweep: ${policy?.label ?? 'GPU only'} at ${cpuBlocks} CPU blocks failed: ${failure}`);
    return {
      cpuHitTokens: report.hits.cpuTierTokens,
      gpuPrefixHitTokens: report.hits.gpuPrefixTokens,
      cpuRereadTokens: report.rereads.cpuTierTokens,
      gpuPrefixRereadTokens: report.rereads.gpuPrefixTokens,
      prefillTokensComputed: report.tokens.prefillComputed,
      recomputedTokens: report.tokens.recomputed,
      requests: report.requests.total,
      verified: report.integrity.checked - report.integrity.mismatches,
      preemptions: report.preemptions,
      load: null,
      ttftP50Ms: report.latency.ttftMs.p50,
      ttftP99Ms: report.latency.ttftMs.p99,
      wallSeconds: report.wallSeconds,
    };
  };
}
