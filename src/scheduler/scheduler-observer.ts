import type { Request } from './request.js';

/** Why a request lost its computed KV and went back to the queue. */
export type PreemptionCause =
  /** The GPU block pool ran out while a running request needed more blocks. */
  | 'out_of_blocks'
  /** A rank was lost: every request's GPU blocks went with it. */
  | 'rank_loss';

export const PREEMPTION_CAUSES: readonly PreemptionCause[] = ['out_of_blocks', 'rank_loss'];

/** A cache tier the scheduler looks prompts up in at admission. */
export type LookupTier = 'gpu_prefix' | 'cpu';

/**
 * What the scheduler reports as it goes, for metrics. Calls are synchronous
 * and must be cheap (plain counters and histograms): they run inside
 * schedule() and updateFromOutput().
 */
export interface SchedulerObserver {
  /** A request finished (any outcome); its timestamps are final. */
  requestFinished(request: Request): void;
  /** `count` requests were preempted for `cause`. */
  requestsPreempted(cause: PreemptionCause, count: number): void;
  /** One lookup of a prompt in `tier` took `ms` milliseconds. */
  lookupTimed(tier: LookupTier, ms: number): void;
  /** Optional: `blocks` blocks failed to come from the remote tier for waiting requests. */
  remoteReadsFailed?(blocks: number): void;
}
