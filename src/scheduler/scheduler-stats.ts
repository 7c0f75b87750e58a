import type { KVCacheUsage } from './kv-cache-manager.js';

/** Running totals the scheduler keeps over its lifetime. */
export class SchedulerCounters {
  requestsAdded = 0;
  requestsFinished = 0;
  requestsAborted = 0;
  requestsFailed = 0;
  preemptions = 0;
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
  /** Requests in the waitingForCpuTierLoad state. */
  readonly waitingForCpuTierLoad: number;
  /** Finished requests whose blocks are still held (loads landing, stores reading them). */
  readonly finishedHoldingBlocks: number;
  readonly requestsAdded: number;
  readonly requestsFinished: number;
  readonly requestsAborted: number;
  readonly requestsFailed: number;
  readonly preemptions: number;
  /** Prompt tokens first reached by being served by the GPU prefix cache / by the connector (TokenLedger). */
  readonly gpuPrefixHitTokens: number;
  readonly cpuTierHitTokens: number;
  /** Positions a request was served again after it had reached them (after a preemption, a rank loss). */
  readonly gpuPrefixRereadTokens: number;
  readonly cpuTierRereadTokens: number;
  /** Prompt positions computed for the first time plus every position computed again. */
  readonly prefillTokensComputed: number;
  /** Output positions computed for the first time. */
  readonly decodeTokensComputed: number;
  /** Positions computed again: reached before by the same request. */
  readonly recomputedTokens: number;
  /** Prompt positions reached (served or computed) for the first time. */
  readonly promptTokensReached: number;
  readonly outputTokens: number;
  readonly loadFailures: {
    readonly blocks: number;
    readonly requestsRecovered: number;
    readonly requestsFailed: number;
  };
  readonly rankResets: number;
  readonly kvCache: KVCacheUsage;
}
