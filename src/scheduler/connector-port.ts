import type { BlockHash } from '../core/block-hash.js';
import type { ModelRunnerOutput, OffloadStepMetadata } from '../protocol/step-protocol.js';
import type { Request } from './request.js';

/**
 * The scheduler-side hooks of a KV connector (docs/architecture.md, "One engine step"), called by
 * the Scheduler at fixed points of a step. The Scheduler never knows which
 * tier is behind them.
 */

/** Tokens beyond the GPU prefix hit that the connector can provide. */
export interface ExternalMatch {
  readonly numTokens: number;
  /** true: loaded asynchronously; the request waits (waitingForCpuTierLoad) until the load job finished. */
  readonly loadAsync: boolean;
}

/** A load job issued for a request after its blocks were allocated. */
export interface IssuedLoad {
  readonly jobId: number;
  /** Index (in the request's block table) of the first GPU block the load writes. */
  readonly firstBlockIndex: number;
  /** GPU block ids the load writes, in table order. */
  readonly gpuBlockIds: readonly number[];
  /** Hashes of those GPU blocks, in the same order. */
  readonly blockHashes: readonly BlockHash[];
}

/** One scheduled request of the step being built, as the connector sees it. */
export interface ScheduledRequestView {
  readonly request: Request;
  /**
   * The request's whole GPU block table after this step's allocation. It is
   * the scheduler's live table (no copy per step): copy it to keep it.
   */
  readonly blockIds: readonly number[];
  /** Tokens computed this step. */
  readonly numScheduledTokens: number;
  /** true when the request was (re)scheduled with a fresh block table (new or resumed). */
  readonly fresh: boolean;
}

export interface StepView {
  readonly step: number;
  /** Valid during the call that gets it: the scheduler refills the array and its views every step. */
  readonly scheduled: readonly ScheduledRequestView[];
  readonly preemptedReqIds: readonly string[];
}

export interface SchedulerConnector {
  /**
   * Tokens beyond `numComputedTokens` (the GPU prefix hit) available from the
   * connector, or null for "not now: ask again in a later step".
   */
  getNumNewMatchedTokens(request: Request, numComputedTokens: number): ExternalMatch | null;

  /**
   * Called after blocks were allocated for a request that got an external
   * match; issues the load. `blockIds` is the request's whole table: the
   * blocks of its GPU prefix hit, then those the load writes, then (when the
   * request waits for the load) blocks reserved for the rest of its prompt.
   */
  updateStateAfterAlloc(request: Request, blockIds: readonly number[], numExternalTokens: number): IssuedLoad | null;

  /** Connector metadata for the step that was just scheduled. */
  buildConnectorMeta(step: StepView): OffloadStepMetadata;

  /** Optional: a request joined the waiting queue (its block hashes are known; it runs later). */
  requestQueued?(request: Request): void;

  /**
   * Optional: a request used `hits + rereads` tokens this connector served (its load completed and
   * the request computes past them): `hits` prompt tokens it reached for the first time, `rereads`
   * tokens it had reached before (a preempted request reading its own blocks again).
   */
  externalTokensServed?(request: Request, hits: number, rereads: number): void;

  /** Applies the merged worker output of a step (job completions). */
  updateConnectorOutput(output: ModelRunnerOutput): void;

  /**
   * Optional: reads for waiting requests that failed in the tiers behind the
   * GPU since the last call (after updateConnectorOutput). Nothing reached a
   * GPU block and the engine never held those blocks: the scheduler counts
   * them as failed loads and the requests compute them, whatever the failure
   * policy.
   */
  takeFailedReads?(): FailedExternalRead[];

  /**
   * A request finished or was aborted. Returns true when freeing its GPU
   * blocks must wait until every store reading them completed on every rank
   * (the request then appears in a later output's finishedSending).
   */
  requestFinished(request: Request, blockIds: readonly number[]): boolean;

  /** true while jobs are in flight or stores are waiting to be submitted. */
  hasPendingWork(): boolean;

  /** Forgets everything the tier held (a rank's CPU shard was lost). */
  reset(): void;

  /**
   * Optional: a free cached GPU block is being reused (evicted from the GPU
   * prefix cache). Its contents are intact now and will be overwritten by
   * this step's writes (store-on-evict offloads it here).
   */
  onGpuBlockEvicted?(blockId: number, hash: BlockHash): void;
}

/** A read into the tiers behind the GPU (a remote fetch) that failed for a waiting request. */
export interface FailedExternalRead {
  readonly reqId: string;
  /** Blocks the read would have filled. */
  readonly blocks: number;
}
