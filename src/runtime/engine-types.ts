import type { EvictionPolicyName } from '../config/eviction-policy-names.js';
import type { StorePolicyName } from '../config/store-policy-name.js';
import type { FinishReason } from '../scheduler/request.js';
import type { RemoteTierMetrics } from '../remote/remote-stats.js';
import type { TransferCounters } from '../metrics/transfer-metrics.js';

/**
 * The library API's types: what an embedding service or the CLI hands the
 * engine and gets back.
 */

export type { EvictionPolicyName, FinishReason, StorePolicyName, TransferCounters };
export type FailurePolicy = 'recompute' | 'fail';

/** Engine configuration before defaults are applied, inferred from the config schema (src/config/engine-schema.ts). */
export type { EngineConfigInput } from '../config/engine-schema.js';

export interface RequestSpec {
  /** Optional caller id (must be unique among live requests); generated when absent. */
  readonly id?: string;
  readonly promptTokens: ArrayLike<number>;
  readonly maxTokens: number;
  readonly seed?: number;
  readonly stopToken?: number | null;
  readonly cacheSalt?: string | null;
  /**
   * When the request arrived, on the engine clock (ms); default: when it is
   * added. A caller that queues requests itself passes their real arrival so
   * TTFT includes the time they waited.
   */
  readonly arrivalMs?: number;
}

export interface FinishedRequest {
  readonly id: string;
  readonly promptTokens: Int32Array;
  readonly outputTokens: readonly number[];
  readonly maxTokens: number;
  readonly seed: number;
  readonly stopToken: number | null;
  readonly finishReason: FinishReason;
  readonly errorMessage: string | null;
  /** Engine clock (ms since engine start). */
  readonly arrivalMs: number;
  /** When it was first scheduled (null if never): arrival to here is its queue wait. */
  readonly firstScheduledMs: number | null;
  readonly firstTokenMs: number | null;
  readonly finishMs: number;
  readonly numPreemptions: number;
  /** Prompt tokens served from the GPU prefix cache / the CPU tier the first time the request reached them. */
  readonly gpuPrefixHitTokens: number;
  readonly cpuTierHitTokens: number;
  /** Of cpuTierHitTokens: those in blocks the remote tier filled (0 without one). */
  readonly remoteHitTokens: number;
  /** Tokens it was served again from each tier after a preemption or a rank loss (not hits). */
  readonly gpuPrefixRereadTokens: number;
  readonly cpuTierRereadTokens: number;
}

export interface EngineMetrics {
  steps: number;
  preemptions: number;
  requests: { added: number; finished: number; aborted: number; failed: number };
  /**
   * Prompt tokens received and output tokens generated; prefillComputed: prompt tokens computed
   * the first time plus every token computed again (`recomputed`: tokens a request had reached
   * before, computed again after a preemption, a rank loss or a failed load that invalidated KV it
   * had used); promptReached: prompt tokens served or computed for the first time (all of `prompt`
   * once every request is past its prompt; a request that failed or was aborted first leaves the rest).
   * Always: hits.gpuPrefixTokens + hits.cpuTierTokens + prefillComputed = promptReached + recomputed.
   */
  tokens: { prompt: number; output: number; prefillComputed: number; recomputed: number; promptReached: number };
  /**
   * Prompt tokens served from a cache tier instead of computed, counted once, when the request
   * uses them for the first time: never the tokens of a failed load.
   */
  hits: { gpuPrefixTokens: number; cpuTierTokens: number };
  /** Tokens served from a cache tier that the request had reached before (after a preemption or a rank loss): not hits. */
  rereads: { gpuPrefixTokens: number; cpuTierTokens: number };
  /** The remote tier's counters; absent without one. */
  remote?: RemoteTierMetrics;
  transfers: { gpuToCpu: TransferCounters; cpuToGpu: TransferCounters };
  loadFailures: { blocks: number; requestsRecovered: number };
  storeFailures: number;
  rankRestarts: number;
  /** Blocks still referenced / CPU blocks still in flight (should be 0 once idle). */
  leaks: { gpuBlocks: number; cpuBlocks: number };
  /**
   * The step clock (docs/architecture.md, "The step clock"): what it prices
   * steps as, the compute it modelled, and the forwards' wall time (slowest
   * rank, loads waited for included).
   */
  stepClock: { description: string; modelledComputeMs: number; forwardMs: number };
}

/** One request's tokens of a step, with its owner (see Engine.addRequest). */
export interface RequestTokens {
  readonly reqId: string;
  readonly newTokenIds: readonly number[];
  /**
   * The one new token as a number, where the step gave exactly one (a
   * decode step's update): a reader that hands tokens on one by one reads it
   * here rather than from the array (a shared, frozen one per token id).
   */
  readonly token?: number;
  readonly owner: unknown;
}

export interface StepReport {
  readonly step: number;
  /** Requests that finished in this step. */
  readonly finished: readonly FinishedRequest[];
  /** Tokens appended this step, per request. */
  readonly newTokens: ReadonlyMap<string, readonly number[]>;
  /**
   * The same tokens as the step's updates, in order, each with the owner
   * given to addRequest (entries may have no tokens). Valid until the next
   * step: the engine refills them in place.
   */
  readonly tokenUpdates: readonly RequestTokens[];
}
