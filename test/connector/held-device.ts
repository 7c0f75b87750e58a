import type { Device, DeviceJobResult, TransferSubmission } from '../../src/device/types.js';

/**
 * A Device whose transfer jobs finish only when the test says so, so a
 * test orders completions by its own steps rather than by time. Only the
 * transfer calls the worker-side connector makes are implemented.
 */
export class HeldDevice implements Device {
  readonly info = { backend: 'host', deviceName: 'held', bytesPerGpuBlock: 1024, bytesPerCpuBlock: 1024, gpuBytes: 0, cpuBytes: 0, cpuChunks: 0 } as const;
  /** Every submission, in order. */
  readonly submitted: TransferSubmission[] = [];
  private readonly pending = new Map<number, TransferSubmission>();
  private finished: DeviceJobResult[] = [];
  private readonly waiters: { ids: Set<number>; resolve: () => void }[] = [];

  submitTransfer(job: TransferSubmission): void {
    if (this.pending.has(job.jobId)) throw new Error(`job ${job.jobId} is already in flight`);
    this.submitted.push(job);
    this.pending.set(job.jobId, job);
  }

  /** Finishes job `jobId`: ok, or failed (a load then reports every block it carried); `timing`: the times a timing device would report. */
  complete(jobId: number, ok = true, timing: Pick<DeviceJobResult, 'startMs' | 'submitMs' | 'enqueueMs'> = {}): void {
    const job = this.pending.get(jobId);
    if (job === undefined) throw new Error(`job ${jobId} is not in flight`);
    this.pending.delete(jobId);
    const load = job.direction === 'cpuToGpu';
    this.finished.push({
      jobId,
      direction: job.direction,
      ok,
      failedGpuBlockIds: ok || !load ? [] : Array.from(job.gpuBlockIds),
      bytes: ok ? job.gpuBlockIds.length * this.info.bytesPerGpuBlock : 0,
      elapsedMs: 1,
      ...(ok ? {} : { error: 'injected device error' }),
      ...timing,
    });
    for (const waiter of [...this.waiters]) {
      waiter.ids.delete(jobId);
      if (waiter.ids.size === 0) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }

  pollFinished(): DeviceJobResult[] {
    const out = this.finished;
    this.finished = [];
    return out;
  }

  waitJobs(jobIds: readonly number[]): Promise<void> {
    const ids = new Set(jobIds.filter((id) => this.pending.has(id)));
    if (ids.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ ids, resolve }));
  }

  pendingJobs(): number {
    return this.pending.size;
  }

  forward(): Promise<Uint32Array> {
    return Promise.reject(new Error('HeldDevice runs no forward'));
  }
  setFaults(): void {}
  faultCounters() {
    return { loadBlocksFailed: 0, storesFailed: 0, jobsDelayed: 0 };
  }
  synchronize(): Promise<void> {
    return Promise.resolve();
  }
  readGpuBlock(): Buffer {
    throw new Error('HeldDevice holds no bytes');
  }
  writeGpuBlock(): void {
    throw new Error('HeldDevice holds no bytes');
  }
  readCpuBlock(): Buffer {
    throw new Error('HeldDevice holds no bytes');
  }
  writeCpuBlock(): void {
    throw new Error('HeldDevice holds no bytes');
  }
  readCpuBlockInto(): number {
    throw new Error('HeldDevice holds no bytes');
  }
  writeCpuBlockFrom(): number {
    throw new Error('HeldDevice holds no bytes');
  }
  close(): void {}
}
