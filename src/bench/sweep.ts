import { analyzeLoadedTrace } from '../analysis/analyze.js';
import { ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { ConfigError, EngineError } from '../core/errors.js';
import { EVICTION_POLICY_NAMES } from '../config/eviction-policy-names.js';
import { parseStorePolicyName } from '../config/store-policy-name.js';
import type { EvictionPolicyName, StorePolicyName } from '../runtime/engine-types.js';
import { loadTrace, type Trace } from '../workload/trace.js';
import { checkArrivalSpan } from '../workload/trace-workload.js';
import { replay as replayOnEngine, runFailure } from './e2e.js';
import { replay as replaySimulated, replaySliceOf, type PolicyConfiguration, type PolicyResult, type ReplaySlice } from './policies.js';
import type { TierStream } from './tier-stream.js';
import { recordTierStream, replayRecordingTierStream } from './tier-stream-replay.js';
import { simulateTierStreamBelady } from './tier-stream-belady.js';

/**
 * A capacity x policy sweep: one trace slice replayed at every CPU-tier
 * capacity with every policy, each point set against Belady's optimum at
 * that capacity (`kvtier analyze`), plus the slice's reuse-distance profile.
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

/** Trace milliseconds per simulated engine step unless a sweep says otherwise. */
export const DEFAULT_TRACE_MS_PER_STEP = 1000;

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
  readonly engine?: { readonly backend: 'host' | 'cuda'; readonly tp: number; readonly speedup: number } | null;
  /**
   * Simulated replay: trace milliseconds per engine step (default 1000). The
   * smaller it is, the more steps serve the same arrivals and the shorter
   * the waiting queue; at the default the conversation trace's prompts ask
   * for about 1.3x what a 2,048-token step computes, so requests queue.
   */
  readonly traceMsPerStep?: number;
  /** Called after each point (e.g. a progress line). */
  readonly onPoint?: (point: SweepPoint, done: number, total: number) => void;
}

export interface SweepPoint {
  readonly policy: string;
  readonly eviction: EvictionPolicyName;
  readonly storePolicy: string;
  readonly cpuBlocks: number;
  readonly cpuHitTokens: number;
  readonly gpuPrefixHitTokens: number;
  readonly prefillTokensComputed: number;
  /** Belady's CPU-tier hit tokens at this capacity over the whole trace (no GPU tier in front; `kvtier analyze`). */
  readonly optimalCpuHitTokens: number;
  /** cpuHitTokens / optimalCpuHitTokens (0 when the optimum is 0). */
  readonly shareOfOptimal: number;
  /** Belady's CPU-tier hit tokens at this capacity over the stream the tier sees behind the GPU tier. */
  readonly tierOptimalCpuHitTokens: number;
  /** cpuHitTokens / tierOptimalCpuHitTokens (0 when that optimum is 0). */
  readonly shareOfTierOptimal: number;
  readonly requests: number;
  /** Finished requests whose tokens equal the reference model's. */
  readonly verified: number;
  readonly preemptions: number;
  /** Engine mode only. */
  readonly ttftP50Ms: number | null;
  readonly ttftP99Ms: number | null;
  readonly wallSeconds: number | null;
}

export interface SweepResult {
  readonly mode: 'simulated' | 'engine';
  /** Simulated replay: trace milliseconds per engine step; null in the engine mode. */
  readonly traceMsPerStep: number | null;
  readonly trace: { readonly file: string; readonly requests: number; readonly tokenScale: number; readonly promptTokens: number };
  readonly gpuBlocks: number;
  readonly blockSize: number;
  readonly offloadFactor: number;
  readonly cpuBlocks: readonly number[];
  readonly policies: readonly string[];
  /** The same slice without a CPU tier. */
  readonly baseline: { readonly gpuPrefixHitTokens: number; readonly prefillTokensComputed: number; readonly ttftP50Ms: number | null };
  /** Belady's optimum per capacity over the whole trace, and the infinite cache's prefix hits. */
  readonly optimum: readonly { readonly cpuBlocks: number; readonly hitTokens: number }[];
  readonly infiniteCacheHitTokens: number;
  /**
   * Belady's optimum per capacity over the lookups and stores the tier sees
   * behind the GPU tier (tier-stream.ts): the most over the stream of a tier
   * that never hits and, in the simulated mode, the streams each policy's
   * replay recorded at that capacity or a smaller one (recorded at a smaller
   * capacity, a stream is bounded at the smaller one, which more room never
   * lowers).
   */
  readonly tierOptimum: readonly { readonly cpuBlocks: number; readonly hitTokens: number }[];
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
  const geometry = { blockSize: options.blockSize, offloadFactor: options.offloadFactor };
  const largest = Math.max(...options.cpuBlocks);
  const profile = analyzeLoadedTrace(trace, { cpuBlocks: largest, ...geometry });
  const optimum = options.cpuBlocks.map((cpuBlocks) => ({
    cpuBlocks,
    hitTokens: cpuBlocks === largest ? profile.optimal.hitTokens : analyzeLoadedTrace(trace, { cpuBlocks, ...geometry }).optimal.hitTokens,
  }));

  const slice = replaySliceOf(trace, options.traceMsPerStep ?? DEFAULT_TRACE_MS_PER_STEP);
  const stream = await recordTierStream(slice, { gpuBlocks: options.gpuBlocks, cpuBlocks: largest, ...geometry });
  const tierOptimum: { cpuBlocks: number; hitTokens: number }[] = [];

  const run = options.engine == null ? simulatedRunner(options, slice) : engineRunner(options, trace);
  const baseline = await run(null, 0);
  const points: SweepPoint[] = [];
  const total = options.cpuBlocks.length * options.policies.length;
  for (const { cpuBlocks, hitTokens } of optimum) {
    const outcomes: PointOutcome[] = [];
    // Streams recorded at a smaller capacity count too: more room never serves fewer of their hits.
    let tierHitTokens = Math.max(simulateTierStreamBelady(stream, cpuBlocks).hitTokens, tierOptimum.at(-1)?.hitTokens ?? 0);
    for (const policy of options.policies) {
      const outcome = await run(policy, cpuBlocks);
      outcomes.push(outcome);
      if (outcome.stream !== null) tierHitTokens = Math.max(tierHitTokens, simulateTierStreamBelady(outcome.stream, cpuBlocks).hitTokens);
    }
    tierOptimum.push({ cpuBlocks, hitTokens: tierHitTokens });
    for (const [i, policy] of options.policies.entries()) {
      const { stream: _stream, ...outcome } = outcomes[i];
      const point: SweepPoint = {
        policy: policy.label,
        eviction: policy.eviction,
        storePolicy: policy.storePolicy,
        cpuBlocks,
        ...outcome,
        optimalCpuHitTokens: hitTokens,
        shareOfOptimal: hitTokens === 0 ? 0 : outcome.cpuHitTokens / hitTokens,
        tierOptimalCpuHitTokens: tierHitTokens,
        shareOfTierOptimal: tierHitTokens === 0 ? 0 : outcome.cpuHitTokens / tierHitTokens,
      };
      points.push(point);
      options.onPoint?.(point, points.length, total);
    }
  }
  return {
    mode: options.engine == null ? 'simulated' : 'engine',
    traceMsPerStep: options.engine == null ? (options.traceMsPerStep ?? DEFAULT_TRACE_MS_PER_STEP) : null,
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
    },
    optimum,
    infiniteCacheHitTokens: profile.blocks.infiniteCacheHitTokens,
    tierOptimum,
    reuseHistogram: profile.reuseDistance.histogram,
    points,
    elapsedSeconds: (performance.now() - started) / 1000,
  };
}

type PointOutcome = { readonly stream: TierStream | null } & Pick<
  SweepPoint,
  | 'cpuHitTokens'
  | 'gpuPrefixHitTokens'
  | 'prefillTokensComputed'
  | 'requests'
  | 'verified'
  | 'preemptions'
  | 'ttftP50Ms'
  | 'ttftP99Ms'
  | 'wallSeconds'
>;

/** Runs one point: a policy at a capacity, or (policy null) the slice without a CPU tier. */
type PointRunner = (policy: SweepPolicy | null, cpuBlocks: number) => Promise<PointOutcome>;

function simulatedRunner(options: SweepOptions, slice: ReplaySlice): PointRunner {
  return async (policy, cpuBlocks) => {
    const replayOptions = { gpuBlocks: options.gpuBlocks, cpuBlocks: Math.max(1, cpuBlocks), blockSize: options.blockSize, offloadFactor: options.offloadFactor };
    let result: PolicyResult;
    let stream: TierStream | null = null;
    if (policy === null) {
      result = await replaySimulated(replayOptions, slice.requests, slice.expected, null, slice.positionSums);
    } else {
      ({ result, stream } = await replayRecordingTierStream(slice, replayOptions, policy));
    }
    return {
      stream,
      cpuHitTokens: result.cpuHitTokens,
      gpuPrefixHitTokens: result.gpuPrefixHitTokens,
      prefillTokensComputed: result.prefillTokensComputed,
      requests: result.requests,
      verified: result.verifiedRequests,
      preemptions: result.preemptions,
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
      prefillTokensComputed: report.tokens.prefillComputed,
      requests: report.requests.total,
      verified: report.integrity.checked - report.integrity.mismatches,
      preemptions: report.preemptions,
      ttftP50Ms: report.latency.ttftMs.p50,
      ttftP99Ms: report.latency.ttftMs.p99,
      wallSeconds: report.wallSeconds,
      stream: null,
    };
  };
}
