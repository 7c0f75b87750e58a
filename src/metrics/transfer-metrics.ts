import type { JobResult } from '../protocol/step-protocol.js';

/** One direction's transfer totals. */
export interface TransferCounters {
  jobs: number;
  failedJobs: number;
  bytes: number;
  /** Sum of job device time (ms). */
  busyMs: number;
}

function emptyCounters(): TransferCounters {
  return { jobs: 0, failedJobs: 0, bytes: 0, busyMs: 0 };
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

  snapshot(): { gpuToCpu: TransferCounters; cpuToGpu: TransferCounters } {
    return { gpuToCpu: { ...this.gpuToCpu }, cpuToGpu: { ...this.cpuToGpu } };
  }
}
