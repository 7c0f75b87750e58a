/**
 * The step protocol's data, shared by the main thread and the rank workers
 * (docs/architecture.md, "One engine step"). Everything here is plain data: it crosses threads by
 * structured clone.
 */

import type { RemoteJobResult, RemoteRankHealth, RemoteStepMetadata } from './remote-jobs.js';

export type TransferDirection = 'gpuToCpu' | 'cpuToGpu';

/** One transfer job as the scheduler assigns it; every rank runs its shard of it. */
export interface TransferJobSpec {
  /** Scheduler-assigned, unique for the engine's lifetime. */
  readonly jobId: number;
  /** The request the job belongs to; null for write-back stores of evicted blocks. */
  readonly reqId: string | null;
  readonly direction: TransferDirection;
  /** GPU block ids, in order. */
  readonly gpuBlockIds: readonly number[];
  /** CPU (offloaded) block ids, in order; each holds `offloadFactor` GPU blocks. */
  readonly cpuBlockIds: readonly number[];
  /**
   * GPU sub-blocks of the first CPU block to skip: a load after a GPU prefix
   * hit that ends mid offloaded block starts inside it. Always 0 for stores.
   * gpuBlockIds.length === cpuBlockIds.length * offloadFactor - firstSubBlock.
   */
  readonly firstSubBlock: number;
  /**
   * A store whose GPU blocks are reused this step (write-back of an evicted
   * block): it is submitted at once, and this step's loads and forward wait
   * until it has read its blocks.
   */
  readonly fence: boolean;
}

/** Connector metadata of one step (scheduler side -> worker side). */
export interface OffloadStepMetadata {
  /** Requests preempted this step: their stores are flushed before anything can overwrite their blocks. */
  readonly flushReqIds: readonly string[];
  /** Stores chosen this step; non-fenced ones are submitted at the start of the next step. */
  readonly stores: readonly TransferJobSpec[];
  /** Loads issued this step (CPU -> GPU). */
  readonly loads: readonly TransferJobSpec[];
  /** Remote tier fetches and writes of this step; absent without a remote tier. */
  readonly remote?: RemoteStepMetadata;
}

/** One request's part of a step. */
export interface ScheduledRequest {
  readonly reqId: string;
  /** The full block table: set when the request is new to the workers or resumed after preemption. */
  readonly blockIds: readonly number[] | null;
  /** Blocks appended to the table since the previous step (empty when blockIds is set). */
  readonly newBlockIds: readonly number[];
  /** Position of the first token computed this step (= computed tokens before the step). */
  readonly startPosition: number;
  /** Tokens computed this step, at positions startPosition, startPosition + 1, ... */
  readonly tokens: readonly number[];
  /** Whether a token is sampled after this step (last prompt chunk, or decode). */
  readonly sample: boolean;
  /** The request's sampling seed (uint32). */
  readonly seed: number;
}

/** What the scheduler decided for one step; the same object goes to every rank. */
export interface SchedulerOutput {
  readonly step: number;
  /** Requests computing tokens this step, in batch order. */
  readonly requests: readonly ScheduledRequest[];
  readonly totalScheduledTokens: number;
  /** Requests preempted while building this step: workers drop their block tables. */
  readonly preemptedReqIds: readonly string[];
  /** Requests finished or aborted since the previous step: workers drop their state. */
  readonly finishedReqIds: readonly string[];
  /** Offloading connector metadata, or null when offloading is off. */
  readonly offload: OffloadStepMetadata | null;
  /**
   * The step clock's busy time of each rank for this step's forward, in ns
   * (docs/architecture.md, "The step clock"); absent: the device's own cost
   * per token.
   */
  readonly computeNs?: number;
}

/**
 * Outcome of one transfer job on one rank, or merged over ranks. A rank may
 * carry several transfer jobs in one copy job on its device: each then gets
 * that copy job's outcome for its own blocks, and its share of the copy
 * job's bytes and device time by GPU blocks.
 */
export interface JobResult {
  readonly jobId: number;
  readonly direction: TransferDirection;
  readonly ok: boolean;
  /** GPU blocks a failed load left invalid (poisoned). */
  readonly failedGpuBlockIds: readonly number[];
  readonly bytes: number;
  /** Device time of the job in milliseconds (max over ranks once merged). */
  readonly elapsedMs: number;
}

/**
 * One copy job as one rank's device ran and timed it; recorded only when the
 * engine traces its devices. Times are device time in ms; `startMs` counts
 * from the time origin the rank's device took when it opened (each rank,
 * and each device a restarted rank opens, has its own origin); negative: the
 * device did not time the job (it could not run it). `submitMs` and
 * `enqueueMs` are the host's side: when the rank's submit call began, on the
 * same axis, and the host ms it spent enqueueing the job's own device work
 * after the job's start mark (inside the device span when the stream was
 * idle); negative: not measured.
 */
export interface CopyJobSpan {
  /** The device job's id: the id of the first transfer job it carries. */
  readonly copyJobId: number;
  /** The transfer jobs it carried, in order. */
  readonly transferJobIds: readonly number[];
  readonly direction: TransferDirection;
  /** Bytes this rank's device moved (0 when it could not run the job). */
  readonly bytes: number;
  readonly ok: boolean;
  /** How the bytes moved ('kernel', 'dma', 'dma-batch', 'memcpy', ...), when the device says. */
  readonly copyPath?: string;
  /** Why the device could not run it. */
  readonly error?: string;
  readonly startMs: number;
  readonly elapsedMs: number;
  readonly submitMs: number;
  readonly enqueueMs: number;
}

/** One rank's forward of a step as its device timed it (same clock, origin and host side as CopyJobSpan). */
export interface ForwardSpan {
  readonly requests: number;
  /** Tokens computed in the step's batch. */
  readonly tokens: number;
  readonly startMs: number;
  readonly elapsedMs: number;
  readonly submitMs: number;
  readonly enqueueMs: number;
}

/** What one rank's device ran that a step reports, as the device timed it. */
export interface RankDeviceSpans {
  /** Which device of the rank timed them (1: the first; a restarted rank's next device has a new time origin). */
  readonly deviceOpen: number;
  /** The step's forward; null when the step computed nothing or the device does not time forwards. */
  readonly forward: ForwardSpan | null;
  /** Copy jobs that finished since the rank's previous report. */
  readonly copyJobs: readonly CopyJobSpan[];
}

/** Copy jobs a rank's device finished, per direction (one copy job may carry several transfer jobs). */
export interface CopyJobCounts {
  readonly gpuToCpu: number;
  readonly cpuToGpu: number;
}

/** The worker-side connector's report of one step on one rank. */
export interface KVConnectorOutput {
  readonly finishedJobs: readonly JobResult[];
  /** Finished requests whose stores are all done on this rank. */
  readonly finishedSending: readonly string[];
  /** Requests whose load job finished (ok or not) on this rank. */
  readonly finishedRecving: readonly string[];
  /** GPU block ids whose load failed on this rank. */
  readonly invalidBlockIds: readonly number[];
  /** Copy jobs that carried this output's finished jobs; absent when none finished. */
  readonly copyJobs?: CopyJobCounts;
  /** Remote tier jobs this rank finished; absent without a remote tier. */
  readonly remoteJobs?: readonly RemoteJobResult[];
  /** This rank's standing with the remote tier, when it changed since the last report. */
  readonly remoteHealth?: RemoteRankHealth;
}

/** One rank's result of one step. */
export interface RankStepOutput {
  readonly rank: number;
  readonly step: number;
  /** Requests sampled this step, in batch order, and this rank's digest of each. */
  readonly sampledReqIds: readonly string[];
  readonly digests: readonly number[];
  readonly connector: KVConnectorOutput;
  /** Wall time the rank spent in the step, and in the forward pass, in ms. */
  readonly stepMs: number;
  readonly forwardMs: number;
  /** Of the GPU blocks whose load failed in this output's jobs, those the fault plan injected (the rest are device errors). */
  readonly injectedLoadFailures?: number;
  /** The step's forward and copy jobs as the device timed them; present only when the engine traces its devices. */
  readonly deviceSpans?: RankDeviceSpans;
}

/** In ModelRunnerOutput.sampledTokens: the request sampled no token this step. */
export const NO_TOKEN = -1;

/** The ranks' outputs merged (KVOutputAggregator), as the scheduler consumes them. */
export interface ModelRunnerOutput {
  readonly step: number;
  /**
   * The token sampled for each request of the step, from the digests of
   * every rank, in batch order (index k is `SchedulerOutput.requests[k]`);
   * NO_TOKEN where a request sampled nothing. Indexed rather than keyed by id:
   * at thousands of requests a map lookup per request per step was a
   * measurable share of the step.
   */
  readonly sampledTokens: Int32Array;
  readonly finishedJobs: readonly JobResult[];
  readonly finishedSending: ReadonlySet<string>;
  readonly finishedRecving: ReadonlySet<string>;
  readonly invalidBlockIds: ReadonlySet<number>;
  /** Remote tier jobs every rank finished (failed if any rank's part failed). */
  readonly remoteJobs?: readonly RemoteJobResult[];
  /** Ranks whose standing with the remote tier changed this step. */
  readonly remoteHealth?: readonly RemoteRankHealth[];
}
