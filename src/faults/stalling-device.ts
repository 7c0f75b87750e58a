import type { Device, DeviceFaults, DeviceSpan, ForwardBatch, ForwardOptions, TransferSubmission } from '../device/types.js';

interface HeldTransfer {
  readonly job: TransferSubmission;
  /** The rank step at whose start it starts by itself; null: only when something needs it. */
  readonly startStep: number | null;
}

/**
 * A Device that carries out the `stall` fault (src/faults/plan.ts). While
 * a stall is set, a submitted transfer is held back here instead of starting
 * on the device. It starts when something needs it: a forward that waits for
 * it, a transfer ordered after it, a wait for it (waitJobs, synchronize), or,
 * when the stall counts steps, the start of the rank step it is due at. A
 * held transfer starts together with every one submitted before it, so each
 * copy stream still runs its jobs in submission order. The rank's bounded
 * wait for progress asks `holds` and does not wait on held transfers.
 * Nothing here depends on wall time: a test orders transfers against the
 * forwards and the steps exactly.
 */
export class StallingDevice implements Device {
  /** The stall in effect: null when none, else how many steps a transfer is held (null: until needed). */
  private stall: { readonly steps: number | null } | null = null;
  private step = 0;
  /** Held transfers in submission order. */
  private readonly held = new Map<number, HeldTransfer>();

  constructor(private readonly inner: Device) {}

  get info(): Device['info'] {
    return this.inner.info;
  }

  /** The rank starts step `step`: transfers due at it start. */
  atStep(step: number): void {
    this.step = step;
    let last: number | null = null;
    for (const [id, held] of this.held) if (held.startStep !== null && held.startStep <= step) last = id;
    if (last !== null) this.startThrough(last);
  }

  /** Whether `jobId` is held back (waiting for progress on it is pointless). */
  holds(jobId: number): boolean {
    return this.held.has(jobId);
  }

  submitTransfer(job: TransferSubmission): void {
    if (this.stall !== null) {
      this.held.set(job.jobId, { job, startStep: this.stall.steps === null ? null : this.step + this.stall.steps });
      return;
    }
    this.startThrough(null);
    this.inner.submitTransfer(job);
  }

  pollFinished(): ReturnType<Device['pollFinished']> {
    return this.inner.pollFinished();
  }

  async waitJobs(jobIds: readonly number[]): Promise<void> {
    this.startThroughAny(jobIds);
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

  lastForwardDeviceSpan(): DeviceSpan | null {
    return this.inner.lastForwardDeviceSpan?.() ?? null;
  }

  setFaults(faults: DeviceFaults): void {
    const { stall, ...deviceFaults } = faults;
    this.stall = stall ?? null;
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
    if (this.held.size === 0) return;
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
      if (id === jobId) return;
    }
  }
}
