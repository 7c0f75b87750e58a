import { ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { modelLenIssue } from '../config/engine-rules.js';
import { ConfigError } from '../core/errors.js';
import { MODEL_PRESETS } from '../model/presets.js';
import { referenceGenerate } from '../model/reference.js';
import type { ModelShape } from '../model/shape.js';
import type { OffloadingConnector } from '../connector/scheduler-connector.js';
import { kvGeometry, type KvGeometry } from '../core/kv-geometry.js';
import type { EvictionPolicyName } from '../runtime/engine-types.js';
import { parseSchedulerConfig } from '../scheduler/config.js';
import { createRequest, type Request } from '../scheduler/request.js';
import { PositionSums } from '../sim/position-sums.js';
import { assembleSimulatedEngine } from '../sim/assemble-simulated.js';
import { loadTrace, type Trace } from '../workload/trace.js';
import { defaultReplayClock, describeReplayClock, modelledParts, type ReplayClock } from './replay-clock.js';
import { summarizeReplayLoad, type ReplayLoad, type ReplayedRequestTimes } from '../report/replay-load.js';
import { tracePromptTokens } from '../workload/trace-tokens.js';

/**
 * Store and eviction policies compared on a slice of a Mooncake trace: the
 * same requests, arriving at the same steps, go through the Scheduler, the
 * OffloadingConnector, the production rank workers over simulated devices and
 * the aggregator (SimulatedEngine) once per configuration (and
 * once without a CPU tier, as the baseline). Every run checks each finished
 * request's tokens against the reference model.
 */

export interface PolicyConfiguration {
  readonly eviction: EvictionPolicyName;
  /** 'on-compute' | 'on-evict' | 'reuse:K'. */
  readonly storePolicy: string;
}

export interface ComparePoliciesOptions {
  readonly traceFile: string;
  /** Requests taken from the start of the trace. */
  readonly maxRequests: number;
  /** Trace lengths are divided by this (each 512-token trace block becomes 512 / tokenScale tokens). */
  readonly tokenScale: number;
  readonly gpuBlocks: number;
  /** CPU tier capacity in offloaded blocks. */
  readonly cpuBlocks: number;
  readonly blockSize: number;
  readonly offloadFactor: number;
  readonly configurations: readonly PolicyConfiguration[];
  /** The replay's clock (replay-clock.ts); default: llama-8b on an H100, modelled. */
  readonly clock?: ReplayClock;
  readonly maxNumBatchedTokens?: number;
  readonly maxNumSeqs?: number;
  /** The GPU prefix cache (default on); off, every prompt block past the first step is computed or loaded. */
  readonly enablePrefixCaching?: boolean;
  /** Fixed clock only: steps a transfer job takes to complete on the simulated devices. Default 1. */
  readonly transferLatencySteps?: number;
  /** Also run without a CPU tier (default true). */
  readonly baseline?: boolean;
  /** Reports each finished configuration (e.g. a progress line). */
  readonly onResult?: (result: PolicyResult) => void;
}

export interface PolicyResult {
  /** 'lru + on-compute', ..., or 'GPU only' for the baseline. */
  readonly label: string;
  readonly configuration: PolicyConfiguration | null;
  readonly requests: number;
  readonly promptTokens: number;
  /** Prompt tokens each tier served the first time their request reached them. */
  readonly gpuPrefixHitTokens: number;
  readonly cpuHitTokens: number;
  /** Tokens each tier served again to a preempted request that had reached them before: not hits. */
  readonly gpuPrefixRereadTokens: number;
  readonly cpuRereadTokens: number;
  /** Prompt tokens computed the first time plus recomputedTokens: gpu + cpu hits + this = promptTokens + recomputedTokens. */
  readonly prefillTokensComputed: number;
  /** Tokens computed again after a preemption. */
  readonly recomputedTokens: number;
  readonly loadJobs: number;
  readonly storeJobs: number;
  /** Offloaded blocks whose store completed. */
  readonly blocksStored: number;
  /** Offers of offloaded blocks a reuse filter declined (a block offered again each step counts each time). */
  readonly declinedOffers: number;
  /** Blocks the CPU tier evicted to make room. */
  readonly cpuEvictions: number;
  /** Cached blocks the GPU prefix cache evicted. */
  readonly gpuEvictions: number;
  readonly preemptions: number;
  readonly steps: number;
  /** Finished requests whose tokens equal the reference model's. */
  readonly verifiedRequests: number;
  /** The replay's pace, queueing and latencies on its clock. */
  readonly load: ReplayLoad;
}

export interface PolicyComparison {
  readonly options: Omit<ComparePoliciesOptions, 'onResult'>;
  readonly results: readonly PolicyResult[];
}

export interface ReplayRequest {
  readonly id: string;
  /** Arrival, in ms since the slice's first request. */
  readonly arrivalMs: number;
  readonly prompt: Int32Array;
  readonly maxTokens: number;
  readonly seed: number;
}

const MODEL: ModelShape = MODEL_PRESETS.tiny;

/** A loaded trace slice as replay requests, with the reference model's output for each. */
export interface ReplaySlice {
  readonly requests: readonly ReplayRequest[];
  readonly expected: ReadonlyMap<string, readonly number[]>;
  /** KV position sums shared by every replay of the slice (the same tokens give the same sums). */
  readonly positionSums: PositionSums;
}

/** The slice's requests (arriving at their trace times) and their reference outputs. */
export function replaySliceOf(trace: Trace): ReplaySlice {
  const requests: ReplayRequest[] = trace.records.map((record) => ({
    id: `L${record.line}`,
    arrivalMs: record.timestampMs - trace.originMs,
    prompt: tracePromptTokens(record.hashIds, record.inputLength, trace.blockTokens, MODEL.vocabSize),
    maxTokens: record.outputLength,
    seed: record.line,
  }));
  const expected = new Map(requests.map((r) => [r.id, referenceGenerate(MODEL, { promptTokens: r.prompt, maxTokens: r.maxTokens, seed: r.seed }).outputTokens]));
  return { requests, expected, positionSums: new PositionSums(MODEL, { maxEntries: 1 << 22 }) };
}

export async function comparePolicies(options: ComparePoliciesOptions): Promise<PolicyComparison> {
  const trace = await loadTrace(options.traceFile, { maxRequests: options.maxRequests, tokenScale: options.tokenScale });
  const slice = replaySliceOf(trace);
  const { requests, expected } = slice;

  const runs: (PolicyConfiguration | null)[] = [...(options.baseline === false ? [] : [null]), ...options.configurations];
  const replayOptions: ReplayOptions = { ...options, geometry: replayGeometry(options.blockSize, options.offloadFactor) };
  const results: PolicyResult[] = [];
  for (const configuration of runs) {
    const result = await replay(replayOptions, requests, expected, configuration, slice.positionSums);
    options.onResult?.(result);
    results.push(result);
  }
  const { onResult: _onResult, ...rest } = options;
  return { options: rest, results };
}

/** The replay settings one run needs (ComparePoliciesOptions without the slice and configurations). */
/** What one replay runs with: the KV geometry whole (replayGeometry), the pools and the pacing. */
export type ReplayOptions = Pick<
  ComparePoliciesOptions,
  'gpuBlocks' | 'cpuBlocks' | 'maxNumBatchedTokens' | 'maxNumSeqs' | 'transferLatencySteps' | 'clock' | 'enablePrefixCaching'
> & { readonly geometry: KvGeometry };

/** The geometry every replay runs in: the bench model on one rank, GPU blocks of `blockSize` tokens grouped `offloadFactor` to an offloaded block. */
export function replayGeometry(blockSize: number, offloadFactor: number): KvGeometry {
  return kvGeometry({ model: MODEL, tp: 1, blockSize, offloadFactor });
}

/**
 * Replays the requests through one configuration (null: no CPU tier);
 * `wrapConnector` may replace the connector built for it by one over the
 * same manager and store policy (e.g. one that records what the tier sees).
 */
export async function replay(
  options: ReplayOptions,
  requests: readonly ReplayRequest[],
  expected: ReadonlyMap<string, readonly number[]>,
  configuration: PolicyConfiguration | null,
  positionSums?: PositionSums,
  wrapConnector?: (built: OffloadingConnector) => OffloadingConnector,
  onFinished?: (id: string, times: ReplayedRequestTimes) => void,
): Promise<PolicyResult> {
  const { geometry } = options;
  const { blockSize } = geometry;
  const longest = Math.max(1, ...requests.map((r) => r.prompt.length + r.maxTokens));
  // The engine's maxModelLen rule, worded for the slice: the user set the pool, not a model length.
  if (modelLenIssue(longest, options.gpuBlocks, blockSize) !== null) {
    throw new ConfigError(
      `gpuBlocks ${options.gpuBlocks} cannot hold the slice's longest request (${longest} tokens in blocks of ${blockSize})`,
    );
  }
  const config = parseSchedulerConfig({
    blockSize,
    numGpuBlocks: options.gpuBlocks,
    maxNumBatchedTokens: options.maxNumBatchedTokens ?? ENGINE_DEFAULTS.maxNumBatchedTokens,
    maxNumSeqs: options.maxNumSeqs ?? 64,
    maxModelLen: longest,
    vocabSize: MODEL.vocabSize,
    enablePrefixCaching: options.enablePrefixCaching ?? true,
  });
  const clock = options.clock ?? defaultReplayClock();
  const modelled = modelledParts(clock, blockSize);
  const latency = options.transferLatencySteps ?? 1;
  // The replay's time in ms since the first arrival: what the step clock says each step took, or a fixed step.
  let nowMs = 0;
  const { scheduler, ranks, tiers } = assembleSimulatedEngine(
    geometry,
    { scheduler: config, cpuTier: configuration === null ? null : { cpuBlocks: options.cpuBlocks, ...configuration } },
    {
      // No monitoring: the replay reads the scheduler's and the tier's own counters.
      scheduler: { now: () => nowMs, stepClock: modelled?.stepClock ?? null, observer: null },
      hooks: { replaceConnector: wrapConnector },
    },
    { loadLatencySteps: latency, storeLatencySteps: latency, positionSums, link: modelled?.link },
  );
  const connector = tiers.offloading?.connector ?? null;
  const manager = tiers.offloading?.manager ?? null;

  // Requests not finished yet, with the tokens they have so far.
  const live = new Map<string, { readonly request: Request; readonly tokens: number[] }>();
  const times: ReplayedRequestTimes[] = [];
  let verified = 0;
  let next = 0;
  while (next < requests.length || scheduler.hasPendingWork()) {
    // An idle engine skips ahead to the next arrival.
    if (!scheduler.hasPendingWork()) nowMs = Math.max(nowMs, requests[next].arrivalMs);
    while (next < requests.length && requests[next].arrivalMs <= nowMs) {
      const r = requests[next++];
      const request = createRequest({ id: r.id, promptTokens: r.prompt, maxTokens: r.maxTokens, seed: r.seed, arrivalTime: r.arrivalMs }, scheduler.requestLimits);
      scheduler.addRequest(request);
      live.set(r.id, { request, tokens: [] });
    }
    if (modelled !== null) ranks.setTime(nowMs * 1e6);
    // The step's tokens exist when it ends: the scheduler reads the clock after the step for first tokens and finishes.
    const scheduled = scheduler.schedule();
    const output = await ranks.execute(scheduled);
    nowMs += stepMsOf(clock, scheduled.computeNs);
    const updates = scheduler.updateFromOutput(scheduled, output);
    for (const update of updates) {
      const { request, tokens } = live.get(update.reqId)!;
      tokens.push(...update.newTokenIds);
      if (update.finishReason === undefined) continue;
      const want = expected.get(update.reqId) as readonly number[];
      if (tokens.length === want.length && tokens.every((t, i) => t === want[i])) verified++;
      const finished: ReplayedRequestTimes = {
        arrivalMs: request.arrivalTime,
        firstScheduledMs: request.firstScheduledTime ?? nowMs,
        firstTokenMs: request.firstTokenTime ?? nowMs,
        finishMs: request.finishTime ?? nowMs,
        outputTokens: tokens.length,
      };
      times.push(finished);
      onFinished?.(update.reqId, finished);
      live.delete(update.reqId);
    }
    if (modelled !== null && scheduled.totalScheduledTokens === 0) nowMs = idleUntil(nowMs, ranks.nextDueNs(), requests[next]?.arrivalMs);
  }
  await ranks.close();

  const stats = scheduler.stats();
  const metrics = connector?.metrics();
  return {
    label: configuration === null ? 'GPU only' : `${configuration.eviction} + ${configuration.storePolicy}`,
    configuration,
    requests: requests.length,
    promptTokens: requests.reduce((sum, r) => sum + r.prompt.length, 0),
    gpuPrefixHitTokens: stats.gpuPrefixHitTokens,
    cpuHitTokens: metrics?.cpuTierHitTokens ?? 0,
    gpuPrefixRereadTokens: stats.gpuPrefixRereadTokens,
    cpuRereadTokens: metrics?.cpuTierRereadTokens ?? 0,
    prefillTokensComputed: stats.prefillTokensComputed,
    recomputedTokens: stats.recomputedTokens,
    loadJobs: metrics?.loadsIssued ?? 0,
    storeJobs: metrics?.storesIssued ?? 0,
    blocksStored: metrics?.offloadedBlocksStored ?? 0,
    declinedOffers: metrics?.storeBlocksDeclined ?? 0,
    cpuEvictions: manager?.stats().evictions ?? 0,
    gpuEvictions: metrics?.gpuBlocksEvicted ?? 0,
    preemptions: stats.preemptions,
    steps: stats.steps,
    verifiedRequests: verified,
    load: summarizeReplayLoad(describeReplayClock(clock), times, stats.preemptions),
  };
}

/** A step's length on the replay's clock, in ms: what the step clock priced, and never less than an idle engine loop. */
function stepMsOf(clock: ReplayClock, computeNs: number | undefined): number {
  if (clock.kind === 'fixed') return clock.msPerStep;
  return Math.max(computeNs ?? 0, IDLE_STEP_NS) / 1e6;
}

/** An engine step that computes nothing still loops: scheduling and polling cost this much. */
const IDLE_STEP_NS = 100_000;

/**
 * A step that computed nothing waits for whatever comes first: a transfer
 * landing or a request arriving (never past now when neither is pending).
 */
function idleUntil(nowMs: number, nextDueNs: number | null, nextArrivalMs: number | undefined): number {
  let until = Infinity;
  if (nextDueNs !== null) until = Math.min(until, nextDueNs / 1e6);
  if (nextArrivalMs !== undefined) until = Math.min(until, nextArrivalMs);
  return Number.isFinite(until) ? Math.max(nowMs, until) : nowMs;
}
