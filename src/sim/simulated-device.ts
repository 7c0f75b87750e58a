import { crc32c } from '../core/crc32c.js';
import { SeededRandom } from '../core/prng.js';
import type {
  Device,
  DeviceFaults,
  DeviceInfo,
  DeviceJobResult,
  FaultCounters,
  ForwardBatch,
  ForwardOptions,
  TransferSubmission,
} from '../device/types.js';
import { mix } from '../model/mix.js';
import { chainInit, chainNext } from '../model/reference.js';
import type { ModelShape } from '../model/shape.js';
import type { KvGeometry } from '../core/kv-geometry.js';
import { SimulatedCpuTier } from './cpu-tier.js';
import type { HostLinkProfile } from '../timing/gpu-profiles.js';
import { LinkSchedule } from '../timing/link-model.js';
import { PositionSums } from './position-sums.js';

/**
 * A Device in TypeScript whose time is the engine step. It holds the chain
 * state of every position slot (the KV elements are a function of it, see
 * docs/architecture.md, "Reference model") and computes this rank's digests
 * from the slots a forward reads through its block tables, so a wrong, stale
 * or missing block gives a wrong token.
 *
 * Transfers complete on the step clock: a job submitted during step s is due
 * at step s + latency. A due load lands before the step's forward; a due
 * store reads its blocks as late as it may, when the rank collects finished
 * jobs after the forward, so blocks reused too early show up as wrong data in
 * the CPU tier. A job lands earlier only when something waits for it: the
 * forward (its `after` jobs), waitJobs, or a job ordered after it. A store
 * not ordered after compute reads its blocks at submission, before a forward
 * still running has written them.
 *
 * A block's bytes (readGpuBlock, writeCpuBlock...) are its positions' chain
 * states as little-endian uint32, not KV elements.
 */

/** Chooses which GPU blocks of a load fail (they are poisoned and reported), given the submission and the step. */
export type DeviceLoadFaults = (job: TransferSubmission, step: number) => readonly number[];

export interface SimulatedDeviceOptions {
  /** The KV cache's shape; this device holds rank `rank`'s heads of it. */
  readonly geometry: KvGeometry;
  readonly rank?: number;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks?: number;
  /** Steps from a load's submission to its completion when nothing waits for it (0: the same step). Default 1. */
  readonly loadLatencySteps?: number;
  /** Steps from a store's submission to its completion when nothing waits for it. Default 1. */
  readonly storeLatencySteps?: number;
  readonly loadFaults?: DeviceLoadFaults | null;
  /**
   * Position sums to reuse (they depend only on the model, the heads and the
   * chain state), so replays of the same requests share them; fresh by default.
   */
  readonly positionSums?: PositionSums;
  /**
   * Transfers on a modelled clock instead of the step clock: a job is due
   * when its host link (src/timing/link-model.ts) would have moved it, read
   * against the time `setTime` gives. The sizes are the timed model's.
   */
  readonly link?: SimulatedLink;
}

/** A host link over modelled time, and the bytes and regions of one GPU block of the model it times. */
export interface SimulatedLink {
  readonly profile: HostLinkProfile;
  readonly bytesPerGpuBlock: number;
  readonly regionsPerGpuBlock: number;
}

interface SimJob {
  readonly jobId: number;
  readonly direction: TransferSubmission['direction'];
  readonly gpuBlockIds: Int32Array;
  readonly cpuBlockIds: Int32Array;
  readonly firstSubBlock: number;
  readonly after: readonly number[];
  readonly dueStep: number;
  /** On a modelled clock, when the link has moved it (ns); else -Infinity. */
  readonly dueNs: number;
  readonly failedGpuBlockIds: readonly number[];
  readonly storeFails: boolean;
  /** An unordered store's blocks, read at submission. */
  readonly snapshot: Uint32Array | null;
}

const POISON = 0xbad0c0de;
const STORE_POISON = 0x5701e0ff;

export class SimulatedDevice implements Device {
  readonly info: DeviceInfo;
  readonly rank: number;
  readonly shape: ModelShape;
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly cpu: SimulatedCpuTier;
  private readonly loadLatency: number;
  private readonly storeLatency: number;
  private loadFaultInjector: DeviceLoadFaults | null;
  private readonly sums: PositionSums;
  private readonly gpu: Uint32Array;
  /** Per slot: the state whose position sum slotSum holds (valid where slotSumValid is 1). */
  private readonly slotState: Uint32Array;
  private readonly slotSum: Uint32Array;
  private readonly slotSumValid: Uint8Array;
  /** Jobs not yet landed, in submission order. */
  private readonly pending = new Map<number, SimJob>();
  private finished: DeviceJobResult[] = [];
  private clock = 0;
  private nowNs = 0;
  private readonly link: LinkSchedule | null;
  private readonly linkSizes: SimulatedLink | null;
  private forwardRunning = false;
  private closed = false;
  private faults: DeviceFaults = {};
  private faultRng = new SeededRandom(0);
  private counters = { loadBlocksFailed: 0, storesFailed: 0, jobsDelayed: 0 };

  constructor(options: SimulatedDeviceOptions) {
    const { geometry } = options;
    const { tp, model: shape, offloadFactor } = geometry;
    const rank = options.rank ?? 0;
    if (!Number.isInteger(rank) || rank < 0 || rank >= tp) throw new RangeError(`rank ${rank} is outside [0, ${tp})`);
    this.rank = rank;
    this.shape = shape;
    this.blockSize = geometry.blockSize;
    this.numGpuBlocks = options.numGpuBlocks;
    const numCpuBlocks = options.numCpuBlocks ?? 0;
    this.cpu = new SimulatedCpuTier(numCpuBlocks, geometry);
    this.loadLatency = options.loadLatencySteps ?? 1;
    this.storeLatency = options.storeLatencySteps ?? 1;
    this.loadFaultInjector = options.loadFaults ?? null;
    this.linkSizes = options.link ?? null;
    this.link = options.link === undefined ? null : new LinkSchedule(options.link.profile);
    const headCount = geometry.kvHeadsPerRank;
    const sums = options.positionSums ?? new PositionSums(shape, { firstHead: rank * headCount, headCount });
    if (sums.modelShape !== shape || sums.firstHead !== rank * headCount || sums.headCount !== headCount) {
      throw new RangeError(`positionSums cover other heads than rank ${rank} of ${tp} holds`);
    }
    this.sums = sums;
    this.gpu = new Uint32Array(options.numGpuBlocks * geometry.blockSize);
    this.slotState = new Uint32Array(this.gpu.length);
    this.slotSum = new Uint32Array(this.gpu.length);
    this.slotSumValid = new Uint8Array(this.gpu.length);
    const blockBytes = geometry.bytesPerGpuBlockPerRank;
    this.info = {
      backend: 'host',
      deviceName: 'simulated (step-clocked)',
      bytesPerGpuBlock: blockBytes,
      bytesPerCpuBlock: blockBytes * offloadFactor,
      gpuBytes: blockBytes * options.numGpuBlocks,
      cpuBytes: blockBytes * offloadFactor * numCpuBlocks,
      cpuChunks: numCpuBlocks > 0 ? 1 : 0,
    };
    this.fillGarbage();
  }

  /** Sets the step the device's clock reads (jobs submitted now are due `latency` steps later). */
  advanceTo(step: number): void {
    if (step < this.clock) throw new RangeError(`step ${step} is before the device clock's ${this.clock}`);
    this.clock = step;
  }

  /** Sets the modelled time (ns) transfers on a link are read against; it never goes back. */
  setTime(nowNs: number): void {
    if (nowNs < this.nowNs) throw new RangeError(`time ${nowNs} ns is before the device's ${this.nowNs} ns`);
    this.nowNs = nowNs;
  }

  /** The earliest time a pending transfer on the link is due (ns), or null when none is pending. */
  nextDueNs(): number | null {
    let next: number | null = null;
    for (const job of this.pending.values()) if (next === null || job.dueNs < next) next = job.dueNs;
    return next;
  }

  setLoadFaults(injector: DeviceLoadFaults | null): void {
    this.loadFaultInjector = injector;
  }

  submitTransfer(job: TransferSubmission): void {
    this.assertOpen();
    if (this.pending.has(job.jobId)) throw new RangeError(`job ${job.jobId} is already in flight`);
    const gpuBlockIds = Int32Array.from(job.gpuBlockIds);
    const cpuBlockIds = Int32Array.from(job.cpuBlockIds);
    const firstSubBlock = job.firstSubBlock ?? 0;
    const f = this.cpu.geometry.offloadFactor;
    if (job.direction === 'gpuToCpu' && firstSubBlock !== 0) {
      throw new RangeError(`store job ${job.jobId}: firstSubBlock must be 0, got ${firstSubBlock}`);
    }
    if (gpuBlockIds.length !== cpuBlockIds.length * f - firstSubBlock) {
      throw new RangeError(
        `job ${job.jobId}: ${gpuBlockIds.length} GPU blocks do not fill ${cpuBlockIds.length} CPU blocks of ${f} from sub-block ${firstSubBlock}`,
      );
    }
    for (const id of gpuBlockIds) this.checkGpuBlock(id);
    for (const id of cpuBlockIds) this.cpu.subBlock(id, 0);
    const isLoad = job.direction === 'cpuToGpu';
    const failed = isLoad ? this.chooseFailedLoadBlocks(job, gpuBlockIds) : [];
    const storeFails = !isLoad && this.faults.storeFailProbability !== undefined && this.draw() < this.faults.storeFailProbability;
    // A delay is counted but takes no step: the clock is the engine step, not wall time.
    if ((this.faults.delayMs ?? 0) > 0) this.counters.jobsDelayed += 1;
    const simJob: SimJob = {
      jobId: job.jobId,
      direction: job.direction,
      gpuBlockIds,
      cpuBlockIds,
      firstSubBlock,
      after: job.after ?? [],
      // On a link the time decides; a job still lands no earlier than the next step's poll.
      dueStep: this.link === null ? this.clock + (isLoad ? this.loadLatency : this.storeLatency) : this.clock + 1,
      dueNs: this.linkDue(job.direction, gpuBlockIds.length),
      failedGpuBlockIds: failed,
      storeFails,
      snapshot: !isLoad && job.orderAfterCompute === false ? this.readBlocks(gpuBlockIds) : null,
    };
    this.pending.set(job.jobId, simJob);
  }

  pollFinished(): DeviceJobResult[] {
    this.assertOpen();
    // Loads due by now land first, then stores due (they read the blocks after this step's forward).
    this.landDue('cpuToGpu');
    this.landDue('gpuToCpu');
    const out = this.finished;
    this.finished = [];
    return out;
  }

  async waitJobs(jobIds: readonly number[]): Promise<void> {
    this.assertOpen();
    for (const id of jobIds) this.land(id);
  }

  pendingJobs(): number {
    return this.pending.size;
  }

  async forward(batch: ForwardBatch, options: ForwardOptions = {}): Promise<Uint32Array> {
    this.assertOpen();
    if (this.forwardRunning) throw new Error('a forward is already running on this device');
    this.forwardRunning = true;
    try {
      // The forward runs after the caller's synchronous work, as a queued kernel would.
      await Promise.resolve();
      for (const id of options.after ?? []) this.land(id);
      this.landDue('cpuToGpu');
      this.compute(batch);
      return this.digests(batch);
    } finally {
      this.forwardRunning = false;
    }
  }

  setFaults(faults: DeviceFaults): void {
    this.faults = { ...faults };
    if (faults.seed !== undefined) this.faultRng = new SeededRandom(faults.seed);
  }

  faultCounters(): FaultCounters {
    return { ...this.counters };
  }

  async synchronize(): Promise<void> {
    for (const id of [...this.pending.keys()]) this.land(id);
  }

  readGpuBlock(blockId: number): Buffer {
    this.checkGpuBlock(blockId);
    return statesToBuffer(this.gpuStates(blockId));
  }

  writeGpuBlock(blockId: number, data: Uint8Array): void {
    this.checkGpuBlock(blockId);
    this.gpu.set(bufferToStates(data, this.blockSize), blockId * this.blockSize);
  }

  readCpuBlock(blockId: number): Buffer {
    return statesToBuffer(this.cpu.readBlock(blockId));
  }

  writeCpuBlock(blockId: number, data: Uint8Array): void {
    this.cpu.writeBlock(blockId, bufferToStates(data, this.cpu.geometry.offloadFactor * this.blockSize));
  }

  readCpuBlockInto(blockId: number, target: Uint8Array, offset = 0): number {
    const at = this.checkBlockRange('readCpuBlockInto', 'target', target, offset);
    const bytes = this.readCpuBlock(blockId);
    target.set(bytes, at);
    return crc32c(bytes);
  }

  writeCpuBlockFrom(blockId: number, source: Uint8Array, offset = 0): number {
    const at = this.checkBlockRange('writeCpuBlockFrom', 'source', source, offset);
    const bytes = source.subarray(at, at + this.cpuImageBytes());
    this.writeCpuBlock(blockId, bytes);
    return crc32c(bytes);
  }

  /** A copy of one GPU block's chain states. */
  gpuStates(blockId: number): Uint32Array {
    this.checkGpuBlock(blockId);
    return this.gpu.slice(blockId * this.blockSize, (blockId + 1) * this.blockSize);
  }

  close(): void {
    this.closed = true;
    this.pending.clear();
    this.finished = [];
  }

  // ---------------------------------------------------------------- transfers

  private linkDue(direction: SimJob['direction'], gpuBlocks: number): number {
    if (this.link === null || this.linkSizes === null) return -Infinity;
    const { bytesPerGpuBlock, regionsPerGpuBlock } = this.linkSizes;
    return this.link.book(direction, this.nowNs, gpuBlocks * bytesPerGpuBlock, gpuBlocks * regionsPerGpuBlock);
  }

  private chooseFailedLoadBlocks(job: TransferSubmission, gpuBlockIds: Int32Array): number[] {
    const failed = new Set<number>(this.loadFaultInjector?.(job, this.clock) ?? []);
    for (const id of failed) {
      if (!gpuBlockIds.includes(id)) throw new RangeError(`load fault names GPU block ${id}, not in job ${job.jobId}`);
    }
    this.counters.loadBlocksFailed += failed.size;
    const { loadFailBlocks, loadFailProbability, loadFailLimit } = this.faults;
    for (const id of gpuBlockIds) {
      if (failed.has(id)) continue;
      if (loadFailLimit !== undefined && this.counters.loadBlocksFailed >= loadFailLimit) break;
      const listed = loadFailBlocks?.includes(id) ?? false;
      const drawn = loadFailProbability !== undefined && loadFailProbability > 0 && this.draw() < loadFailProbability;
      if (listed || drawn) {
        failed.add(id);
        this.counters.loadBlocksFailed += 1;
      }
    }
    // In job order, as a device reports them.
    return failed.size === 0 ? [] : Array.from(gpuBlockIds).filter((id) => failed.has(id));
  }

  /** A uniform draw in [0, 1) from the fault seed. */
  private draw(): number {
    return this.faultRng.nextUint32() / 0x1_0000_0000;
  }

  private landDue(direction: SimJob['direction']): void {
    if (this.pending.size === 0) return;
    const due: number[] = [];
    for (const job of this.pending.values()) {
      if (job.direction === direction && job.dueStep <= this.clock && job.dueNs <= this.nowNs) due.push(job.jobId);
    }
    for (const id of due) this.land(id);
  }

  /** Completes a job (after the jobs it is ordered after); a job no longer pending is a no-op. */
  private land(jobId: number): void {
    const job = this.pending.get(jobId);
    if (job === undefined) return;
    this.pending.delete(jobId);
    for (const id of job.after) this.land(id);
    if (job.direction === 'gpuToCpu') this.landStore(job);
    else this.landLoad(job);
    const ok = job.failedGpuBlockIds.length === 0 && !job.storeFails;
    if (job.storeFails) this.counters.storesFailed += 1;
    this.finished.push({
      jobId: job.jobId,
      direction: job.direction,
      ok,
      failedGpuBlockIds: job.failedGpuBlockIds.slice(),
      bytes: job.gpuBlockIds.length * this.info.bytesPerGpuBlock,
      // No device time and no startMs: jobs land by the step clock, not on a
      // timed stream, so a device trace counts them as untimed.
      elapsedMs: 0,
    });
  }

  private landStore(job: SimJob): void {
    const f = this.cpu.geometry.offloadFactor;
    const bs = this.blockSize;
    for (let k = 0; k < job.gpuBlockIds.length; k++) {
      const dst = this.cpu.subBlock(job.cpuBlockIds[(k / f) | 0], k % f);
      if (job.storeFails) {
        for (let i = 0; i < bs; i++) dst[i] = mix((STORE_POISON ^ (k * bs + i)) >>> 0);
      } else if (job.snapshot !== null) {
        dst.set(job.snapshot.subarray(k * bs, (k + 1) * bs));
      } else {
        const src = job.gpuBlockIds[k] * bs;
        dst.set(this.gpu.subarray(src, src + bs));
      }
    }
  }

  private landLoad(job: SimJob): void {
    const f = this.cpu.geometry.offloadFactor;
    const bs = this.blockSize;
    const failed = new Set(job.failedGpuBlockIds);
    for (let k = 0; k < job.gpuBlockIds.length; k++) {
      const gpuBlock = job.gpuBlockIds[k];
      const dst = this.gpu.subarray(gpuBlock * bs, (gpuBlock + 1) * bs);
      if (failed.has(gpuBlock)) {
        for (let i = 0; i < bs; i++) dst[i] = mix((POISON ^ (gpuBlock * bs + i)) >>> 0);
        continue;
      }
      const j = k + job.firstSubBlock;
      dst.set(this.cpu.subBlock(job.cpuBlockIds[(j / f) | 0], j % f));
    }
  }

  private readBlocks(gpuBlockIds: Int32Array): Uint32Array {
    const bs = this.blockSize;
    const out = new Uint32Array(gpuBlockIds.length * bs);
    gpuBlockIds.forEach((id, k) => out.set(this.gpu.subarray(id * bs, (id + 1) * bs), k * bs));
    return out;
  }

  // ---------------------------------------------------------------- forward

  /** Writes s(p) = chainNext(s(p-1), token, p) through each request's table, in batch order. */
  private compute(batch: ForwardBatch): void {
    const bs = this.blockSize;
    const init = chainInit(this.shape.modelSeed);
    for (let i = 0; i < batch.numRequests; i++) {
      const tableStart = batch.blockTableOffsets[i];
      const tableLength = batch.blockTableOffsets[i + 1] - tableStart;
      const start = batch.startPositions[i];
      const tokenStart = batch.tokenOffsets[i];
      const end = start + batch.tokenOffsets[i + 1] - tokenStart;
      if (end > tableLength * bs) {
        throw new RangeError(`request ${i} of the batch computes up to position ${end - 1} but its table covers ${tableLength * bs}`);
      }
      for (let k = 0; k < tableLength; k++) this.checkGpuBlock(batch.blockTables[tableStart + k]);
      for (let p = start; p < end; p++) {
        const prev = p === 0 ? init : this.gpu[batch.blockTables[tableStart + (((p - 1) / bs) | 0)] * bs + ((p - 1) % bs)];
        this.gpu[batch.blockTables[tableStart + ((p / bs) | 0)] * bs + (p % bs)] = chainNext(prev, batch.tokens[tokenStart + p - start], p);
      }
    }
  }

  /** This rank's digest of every sampled request, read after every write of the batch. */
  private digests(batch: ForwardBatch): Uint32Array {
    const bs = this.blockSize;
    const out = new Uint32Array(batch.numRequests);
    for (let i = 0; i < batch.numRequests; i++) {
      if (batch.sample[i] === 0) continue;
      const tableStart = batch.blockTableOffsets[i];
      const n = batch.startPositions[i] + batch.tokenOffsets[i + 1] - batch.tokenOffsets[i];
      let digest = 0;
      for (let p = 0; p < n; p++) {
        const slot = batch.blockTables[tableStart + ((p / bs) | 0)] * bs + (p % bs);
        const s = this.gpu[slot];
        // Each slot remembers the sum of the state it held when last read: a rewritten slot misses.
        let sum: number;
        if (this.slotSumValid[slot] === 1 && this.slotState[slot] === s) {
          sum = this.slotSum[slot];
        } else {
          sum = this.sums.of(s);
          this.slotState[slot] = s;
          this.slotSum[slot] = sum;
          this.slotSumValid[slot] = 1;
        }
        digest = (digest + Math.imul(p + 1, sum)) >>> 0;
      }
      out[i] = digest;
    }
    return out;
  }

  private checkGpuBlock(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.numGpuBlocks) {
      throw new RangeError(`GPU block id ${id} is outside [0, ${this.numGpuBlocks})`);
    }
  }

  /** Checks a buffer and offset that one CPU block is copied to or from; returns the offset. */
  private checkBlockRange(operation: string, name: string, buffer: Uint8Array, offset: number): number {
    if (!(buffer instanceof Uint8Array)) throw new TypeError(`${operation}: ${name} must be a Uint8Array or Buffer`);
    const block = this.cpuImageBytes();
    if (!Number.isInteger(offset) || offset < 0 || offset > buffer.length - block) {
      throw new RangeError(
        `${operation}: offset = ${String(offset)} leaves no room for a CPU block image of ${block} bytes in ${name}.length = ${buffer.length}`,
      );
    }
    return offset;
  }

  /** Bytes of a CPU block's image here: its positions' chain states (see the class comment), not bytesPerCpuBlock. */
  private cpuImageBytes(): number {
    return this.cpu.geometry.offloadFactor * this.blockSize * 4;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('device is closed');
  }

  private fillGarbage(): void {
    // Never-written slots hold garbage, not zeros, so reading one gives a wrong token.
    for (let i = 0; i < this.gpu.length; i++) this.gpu[i] = mix((i ^ 0x5eed5eed) >>> 0);
  }
}

function statesToBuffer(states: Uint32Array): Buffer {
  const out = Buffer.alloc(states.length * 4);
  states.forEach((s, i) => out.writeUInt32LE(s, i * 4));
  return out;
}

function bufferToStates(data: Uint8Array, count: number): Uint32Array {
  if (data.length !== count * 4) throw new RangeError(`a block holds ${count} chain states (${count * 4} bytes), got ${data.length} bytes`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint32Array(count);
  for (let i = 0; i < count; i++) out[i] = view.getUint32(i * 4, true);
  return out;
}
