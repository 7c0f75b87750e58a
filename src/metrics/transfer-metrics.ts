import type { JobResult, RankStepOutput } from '../protocol/step-protocol.js';

/** One direction's transfer totals. */
export interface TransferCounters {
  /** Transfer jobs (one per request and direction a step issues) finished on every rank. */
  jobs: number;
  failedJobs: number;
  /** Bytes moved, summed over ranks. */
  bytes: number;
  /** Sum of job device time (ms). */
  busyMs: number;
  /**
   * Copy jobs the ranks' devices ran to move them, summed over ranks: a rank
   * coalesces the transfer jobs it submits together, so `bytes / copyJobs`
   * is the mean size of what one device copied at a time.
   */
  copyJobs: number;
}

function emptyCounters(): TransferCounters {
  return { jobs: 0, failedJobs: 0, bytes: 0, busyMs: 0, copyJobs: 0 };
}

/** Transfer totals per direction, from the jobs finished on every rank. */
export class TransferMetrics {
  readonly gpuToCpu = emptyCounters();
  readonly cpuToGpu = emptyCounters();

  record(jobs: readonly JobResult[]): void {
    for (const job of jobs) {
      const c = job.direction === 'gpuToCpu' ? this.gpuToCpu : this.cpuToGpu;
      c.jobs += 1;
      if (!job.ok) c.failedJobs += 1;
      c.bytes += job.bytes;
      c.busyMs += job.elapsedMs;
    }
  }

  /** The copy jobs each rank reported finished in its step output. */
  recordCopyJobs(outputs: readonly RankStepOutput[]): void {
    for (const out of outputs) {
      const counts = out.connector.copyJobs;
      if (counts === undefined) continue;
      this.gpuToCpu.copyJobs += counts.gpuToCpu;
      this.cpuToGpu.copyJobs += counts.cpuToGpu;
    }
  }

  snapshot(): { gpuToCpu: TransferCounters; cpuToGpu: TransferCounters } {
    return { gpuToCpu: { ...this.gpuToCpu }, cpuToGpu: { ...this.cpuToGpu } };
  }
}
