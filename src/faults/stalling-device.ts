import type { Device, DeviceFaults, ForwardBatch, ForwardOptions, TransferSubmission } from '../device/types.js';

interface HeldTransfer {
  readonly job: TransferSubmission;
  readonly submitted: Promise<void>;
  readonly submit: () => void;
}

/**
 * A Device that carries out the `stall` fault (src/faults/plan.ts). While
 * stalled, a submitted transfer is held back here instead of starting on the
 * device. A forward that waits for it, or a transfer ordered after it,
 * starts it (and every held transfer submitted before it, so each copy
 * stream still runs its jobs in submission order). A wait on it while the
 * stall lasts waits until one of those happens; once the stall has ended, a
 * wait starts it. Nothing here depends on wall time: a test holds a rank's
 * transfers for exactly as long as nothing needs them.
 */
export class StallingDevice implements Device {
  private stalled = false;
  /** Held transfers in submission order. */
  private readonly held = new Map<number, HeldTransfer>();

  constructor(private readonly inner: Device) {}

  get info(): Device['info'] {
    return this.inner.info;
  }

  submitTransfer(job: TransferSubmission): void {
    if (this.stalled) {
      let submit!: () => void;
      const submitted = new Promise<void>((resolve) => {
        submit = resolve;
      });
      this.held.set(job.jobId, { job, submitted, submit });
      return;
    }
    this.startThrough(null);
    this.inner.submitTransfer(job);
  }

  pollFinished(): ReturnType<Device['pollFinished']> {
    return this.inner.pollFinished();
  }

  async waitJobs(jobIds: readonly number[]): Promise<void> {
    const held = jobIds.filter((id) => this.held.has(id));
    if (held.length > 0) {
      if (this.stalled) await Promise.all(held.map((id) => this.held.get(id)!.submitted));
      else this.startThroughAny(held);
    }
    await this.inner.waitJobs(jobIds);
  }

  pendingJobs(): number {
    return this.inner.pendingJobs() + this.held.size;
  }

  forward(batch: ForwardBatch, options?: ForwardOptions): Promise<Uint32Array> {
    this.startThroughAny(options?.after ?? []);
    return this.inner.forward(batch, options);
  }

  lastForwardDeviceMs(): number | null {
    return this.inner.lastForwardDeviceMs?.() ?? null;
  }

  setFaults(faults: DeviceFaults): void {
    const { stallTransfers, ...deviceFaults } = faults;
    this.stalled = stallTransfers === true;
    this.inner.setFaults(deviceFaults);
  }

  faultCounters(): ReturnType<Device['faultCounters']> {
    return this.inner.faultCounters();
  }

  async synchronize(): Promise<void> {
    this.startThrough(null);
    await this.inner.synchronize();
  }

  readGpuBlock(blockId: number): Buffer {
    return this.inner.readGpuBlock(blockId);
  }

  writeGpuBlock(blockId: number, data: Uint8Array): void {
    this.inner.writeGpuBlock(blockId, data);
  }

  readCpuBlock(blockId: number): Buffer {
    return this.inner.readCpuBlock(blockId);
  }

  writeCpuBlock(blockId: number, data: Uint8Array): void {
    this.inner.writeCpuBlock(blockId, data);
  }

  readCpuBlockInto(blockId: number, target: Uint8Array, offset?: number): number {
    return this.inner.readCpuBlockInto(blockId, target, offset);
  }

  writeCpuBlockFrom(blockId: number, source: Uint8Array, offset?: number): number {
    return this.inner.writeCpuBlockFrom(blockId, source, offset);
  }

  close(): void {
    this.held.clear();
    this.inner.close();
  }

  /** Starts held transfers in order through the last of `jobIds` that is held. */
  private startThroughAny(jobIds: readonly number[]): void {
    let last: number | null = null;
    for (const id of this.held.keys()) if (jobIds.includes(id)) last = id;
    if (last !== null) this.startThrough(last);
  }

  /** Starts held transfers in submission order up to and including `jobId` (null: all). */
  private startThrough(jobId: number | null): void {
    for (const [id, held] of this.held) {
      // A transfer is ordered only after earlier ones: those it names were started before it.
      this.held.delete(id);
      this.inner.submitTransfer(held.job);
      held.submit();
      if (id === jobId) return;
    }
  }
}
