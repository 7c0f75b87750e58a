import type { KVCacheUsage } from './kv-cache-manager.js';

/** Running totals the scheduler keeps over its lifetime. */
export class SchedulerCounters {
  requestsAdded = 0;
  requestsFinished = 0;
  requestsAborted = 0;
  requestsFailed = 0;
  preemptions = 0;
  /** Prompt tokens served by the GPU prefix cache / by the connector at admission. */
  gpuPrefixHitTokens = 0;
  externalHitTokens = 0;
  /** Tokens computed by forward passes, except the single new token of a decode step. */
  prefillTokensComputed = 0;
  decodeTokensComputed = 0;
  outputTokens = 0;
  /** Distinct GPU blocks reported invalid (failed loads) and what became of the requests using them. */
  failedLoadBlocks = 0;
  requestsRecovered = 0;
  requestsFailedByLoad = 0;
  rankResets = 0;
}

export interface SchedulerStats {
  /** Steps scheduled so far. */
  readonly steps: number;
  readonly running: number;
  /** Waiting or preempted requests not waiting for KV. */
  readonly waiting: number;
  readonly waitingForRemoteKvs: number;
  /** Finished requests whose blocks are still held (loads landing, stores reading them). */
  readonly finishedHoldingBlocks: number;
  readonly requestsAdded: number;
  readonly requestsFinished: number;
  readonly requestsAborted: number;
  readonly requestsFailed: number;
  readonly preemptions: number;
  readonly gpuPrefixHitTokens: number;
  readonly externalHitTokens: number;
  readonly prefillTokensComputed: number;
  readonly decodeTokensComputed: number;
  readonly outputTokens: number;
  readonly loadFailures: {
    readonly blocks: number;
    readonly requestsRecovered: number;
    readonly requestsFailed: number;
  };
  readonly rankResets: number;
  readonly kvCache: KVCacheUsage;
}
