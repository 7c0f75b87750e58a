import { ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { modelLenIssue } from '../config/engine-rules.js';
import { ConfigError } from '../core/errors.js';
import { MODEL_PRESETS } from '../model/presets.js';
import { referenceGenerate } from '../model/reference.js';
import type { ModelShape } from '../model/shape.js';
import type { OffloadingConnector } from '../connector/scheduler-connector.js';
import { createOffloadingConnector } from '../connector/create-connector.js';
import type { OffloadingManager } from '../offload/manager.js';
import type { EvictionPolicyName } from '../runtime/engine-types.js';
import { parseSchedulerConfig } from '../scheduler/config.js';
import { createRequest } from '../scheduler/request.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { PositionSums } from '../sim/position-sums.js';
import { SimulatedEngine } from '../sim/simulated-engine.js';
import { SimulatedRanks } from '../sim/simulated-ranks.js';
import { loadTrace, type Trace } from '../workload/trace.js';
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
  /** Trace milliseconds per engine step: a request arrives at step floor(timestamp / traceMsPerStep). Default 1000. */
  readonly traceMsPerStep?: number;
  readonly maxNumBatchedTokens?: number;
  readonly maxNumSeqs?: number;
  /** Steps a transfer job takes to complete on the simulated devices. Default 1. */
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
}

export interface PolicyComparison {
  readonly options: Omit<ComparePoliciesOptions, 'onResult'>;
  readonly results: readonly PolicyResult[];
}

export interface ReplayRequest {
  readonly id: string;
  readonly arrivalStep: number;
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

/** The slice's requests (arriving at step floor(ms / traceMsPerStep)) and their reference outputs. */
export function replaySliceOf(trace: Trace, traceMsPerStep = 1000): ReplaySlice {
  if (!(traceMsPerStep > 0)) throw new ConfigError(`traceMsPerStep must be > 0, got ${traceMsPerStep}`);
  const requests: ReplayRequest[] = trace.records.map((record) => ({
    id: `L${record.line}`,
    arrivalStep: Math.floor((record.timestampMs - trace.originMs) / traceMsPerStep),
    prompt: tracePromptTokens(record.hashIds, record.inputLength, trace.blockTokens, MODEL.vocabSize),
    maxTokens: record.outputLength,
    seed: record.line,
  }));
  const expected = new Map(requests.map((r) => [r.id, referenceGenerate(MODEL, { promptTokens: r.prompt, maxTokens: r.maxTokens, seed: r.seed }).outputTokens]));
  return { requests, expected, positionSums: new PositionSums(MODEL, { maxEntries: 1 << 22 }) };
}

export async function comparePolicies(options: ComparePoliciesOptions): Promise<PolicyComparison> {
  const trace = await loadTrace(options.traceFile, { maxRequests: options.maxRequests, tokenScale: options.tokenScale });
  const slice = replaySliceOf(trace, options.traceMsPerStep ?? 1000);
  const { requests, expected } = slice;

  const runs: (PolicyConfiguration | null)[] = [...(options.baseline === false ? [] : [null]), ...options.configurations];
  const results: PolicyResult[] = [];
  for (const configuration of runs) {
    const result = await replay(options, requests, expected, configuration, slice.positionSums);
    options.onResult?.(result);
    results.push(result);
  }
  const { onResult: _onResult, ...rest } = options;
  return { options: rest, results };
}

/** The replay settings one run needs (ComparePoliciesOptions without the slice and configurations). */
export type ReplayOptions = Pick<
  ComparePoliciesOptions,
  'gpuBlocks' | 'cpuBlocks' | 'blockSize' | 'offloadFactor' | 'maxNumBatchedTokens' | 'maxNumSeqs' | 'transferLatencySteps'
>;

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
): Promise<PolicyResult> {
  const longest = Math.max(1, ...requests.map((r) => r.prompt.length + r.maxTokens));
  // The engine's maxModelLen rule, worded for the slice: the user set the pool, not a model length.
  if (modelLenIssue(longest, options.gpuBlocks, options.blockSize) !== null) {
    throw new ConfigError(
      `gpuBlocks ${options.gpuBlocks} cannot hold the slice's longest request (${longest} tokens in blocks of ${options.blockSize})`,
    );
  }
  const config = parseSchedulerConfig({
    blockSize: options.blockSize,
    numGpuBlocks: options.gpuBlocks,
    maxNumBatchedTokens: options.maxNumBatchedTokens ?? ENGINE_DEFAULTS.maxNumBatchedTokens,
    maxNumSeqs: options.maxNumSeqs ?? 64,
    maxModelLen: longest,
    vocabSize: MODEL.vocabSize,
  });
  let connector: OffloadingConnector | null = null;
  let manager: OffloadingManager | null = null;
  if (configuration !== null) {
    const parts = createOffloadingConnector({
      model: MODEL,
      tp: 1,
      blockSize: options.blockSize,
      offloadFactor: options.offloadFactor,
      cpuBlocks: options.cpuBlocks,
      eviction: configuration.eviction,
      storePolicy: configuration.storePolicy,
    });
    connector = wrapConnector === undefined ? parts.connector : wrapConnector(parts.connector);
    manager = parts.manager;
  }
  const latency = options.transferLatencySteps ?? 1;
  const ranks = new SimulatedRanks({
    shape: MODEL,
    blockSize: options.blockSize,
    numGpuBlocks: options.gpuBlocks,
    numCpuBlocks: configuration === null ? 0 : options.cpuBlocks,
    offloadFactor: options.offloadFactor,
    loadLatencySteps: latency,
    storeLatencySteps: latency,
    positionSums,
  });
  let clock = 0;
  const scheduler = new Scheduler(config, { connector, now: () => clock });
  connector?.attachGpuPrefixCache(scheduler.kvCacheManager.pool);
  const engine = new SimulatedEngine(scheduler, ranks);

  const outputs = new Map<string, number[]>();
  let verified = 0;
  let next = 0;
  while (next < requests.length || scheduler.hasPendingWork()) {
    // An idle engine skips ahead to the next arrival.
    if (!scheduler.hasPendingWork()) clock = Math.max(clock, requests[next].arrivalStep);
    while (next < requests.length && requests[next].arrivalStep <= clock) {
      const r = requests[next++];
      scheduler.addRequest(createRequest({ id: r.id, promptTokens: r.prompt, maxTokens: r.maxTokens, seed: r.seed, arrivalTime: clock }, scheduler.requestLimits));
      outputs.set(r.id, []);
    }
    const { updates } = await engine.step();
    for (const update of updates) {
      const tokens = outputs.get(update.reqId) as number[];
      tokens.push(...update.newTokenIds);
      if (update.finishReason === undefined) continue;
      const want = expected.get(update.reqId) as readonly number[];
      if (tokens.length === want.length && tokens.every((t, i) => t === want[i])) verified++;
      outputs.delete(update.reqId);
    }
    clock++;
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
    cpuHitTokens: metrics?.cpuHitTokens ?? 0,
    gpuPrefixRereadTokens: stats.gpuPrefixRereadTokens,
    cpuRereadTokens: metrics?.cpuRereadTokens ?? 0,
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
  };
}
