import { mix } from '../model/mix.js';
import { chainInit, chainNext, sampleToken } from '../model/reference.js';
import { bytesPerGpuBlock, type ModelShape } from '../model/shape.js';
import type { JobResult, ModelRunnerOutput, SchedulerOutput, TransferJobSpec } from '../protocol/step-protocol.js';
import { SimulatedCpuTier } from './cpu-tier.js';
import { PositionSums } from './position-sums.js';

/**
 * A pure-TypeScript stand-in for the rank workers (one rank, tp = 1). It
 * keeps the chain state of every GPU slot and runs a SchedulerOutput the way
 * the device does: new tokens read s(p-1) through the block table and write
 * s(p), in batch order; digests then read every position through the block
 * table. A wrong, stale or missing block therefore gives a wrong token.
 *
 * Transfers follow docs/architecture.md, "One engine step": preempted requests' stores are
 * flushed first; stores deferred from the previous step are submitted, then
 * fenced stores (which read their blocks at once) and this step's loads; a
 * load this step reads is waited for before the forward; a store reads its
 * blocks as late as it may (when it completes), so blocks reused too early
 * show up as wrong data in the CPU tier.
 */

/** Chooses which GPU blocks of a load job fail (their slots are poisoned and reported invalid). */
export type LoadFaultInjector = (job: TransferJobSpec, step: number) => readonly number[];

export interface SimulatedRunnerOptions {
  readonly shape: ModelShape;
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks?: number;
  readonly offloadFactor?: number;
  /** Steps from a load's submission to its completion when no step reads it sooner (0: the same step). Default 1. */
  readonly loadLatencySteps?: number;
  /** Steps from a store's submission to its completion (0: the same step). Default 1. */
  readonly storeLatencySteps?: number;
  readonly loadFaults?: LoadFaultInjector | null;
  /**
   * Position sums to reuse (they depend only on the model and the tokens), so
   * replays of the same requests share them; a fresh cache by default.
   */
  readonly positionSums?: PositionSums;
}

interface InFlightJob {
  readonly spec: TransferJobSpec;
  readonly completeAtStep: number;
  readonly failedGpuBlockIds: readonly number[];
}

const POISON = 0xbad0c0de;

export class SimulatedRunner {
  readonly shape: ModelShape;
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly cpu: SimulatedCpuTier;
  private readonly loadLatency: number;
  private readonly storeLatency: number;
  private loadFaults: LoadFaultInjector | null;
  private readonly bytesPerBlock: number;
  private readonly sums: PositionSums;
  private readonly gpu: Uint32Array;
  /** Per GPU slot: the state whose position sum slotSum holds (valid where slotSumValid is 1). */
  private readonly slotState: Uint32Array;
  private readonly slotSum: Uint32Array;
  private readonly slotSumValid: Uint8Array;
  private readonly tables = new Map<string, number[]>();
  private inFlight: InFlightJob[] = [];
  private deferredStores: TransferJobSpec[] = [];
  private readonly storesByRequest = new Map<string, Set<number>>();
  private readonly finishedAwaitingStores = new Set<string>();
  private lastStep = -1;

  constructor(options: SimulatedRunnerOptions) {
    this.shape = options.shape;
    this.blockSize = options.blockSize;
    this.numGpuBlocks = options.numGpuBlocks;
    this.cpu = new SimulatedCpuTier(options.numCpuBlocks ?? 0, options.offloadFactor ?? 1, options.blockSize);
    this.loadLatency = options.loadLatencySteps ?? 1;
    this.storeLatency = options.storeLatencySteps ?? 1;
    this.loadFaults = options.loadFaults ?? null;
    this.bytesPerBlock = bytesPerGpuBlock(options.shape, 1, options.blockSize);
    if (options.positionSums !== undefined && options.positionSums.modelShape !== options.shape) {
      throw new RangeError('positionSums were computed for another model shape');
    }
    this.sums = options.positionSums ?? new PositionSums(options.shape);
    this.gpu = new Uint32Array(options.numGpuBlocks * options.blockSize);
    this.slotState = new Uint32Array(this.gpu.length);
    this.slotSum = new Uint32Array(this.gpu.length);
    this.slotSumValid = new Uint8Array(this.gpu.length);
    this.fillGarbage();
  }

  setLoadFaults(injector: LoadFaultInjector | null): void {
    this.loadFaults = injector;
  }

  /** Jobs submitted or deferred and not yet reported finished. */
  pendingJobs(): number {
    return this.inFlight.length + this.deferredStores.length;
  }

  /** A copy of one GPU block's chain states. */
  readGpuBlock(blockId: number): Uint32Array {
    this.checkGpuBlock(blockId);
    return this.gpu.slice(blockId * this.blockSize, (blockId + 1) * this.blockSize);
  }

  /** Everything is lost (a rank died): GPU slots hold garbage, the CPU tier is empty, no job is in flight. */
  reset(): void {
    this.fillGarbage();
    this.cpu.clear();
    this.tables.clear();
    this.inFlight = [];
    this.deferredStores = [];
    this.storesByRequest.clear();
    this.finishedAwaitingStores.clear();
  }

  execute(so: SchedulerOutput): ModelRunnerOutput {
    if (so.step <= this.lastStep) throw new Error(`step ${so.step} does not follow step ${this.lastStep}`);
    this.lastStep = so.step;
    const step = so.step;
    const out = new StepReport();

    for (const id of so.finishedReqIds) {
      this.tables.delete(id);
      this.noteFinished(id, out);
    }
    for (const id of so.preemptedReqIds) this.tables.delete(id);
    this.bindTables(so);

    const offload = so.offload;
    if (offload !== null) {
      // a. Preempted requests' stores read their blocks before anything can overwrite them.
      for (const id of offload.flushReqIds) this.flush(id, out);
      // b. Deferred stores, fenced stores, then loads.
      for (const spec of this.deferredStores) this.inFlight.push({ spec, completeAtStep: step + this.storeLatency, failedGpuBlockIds: [] });
      this.deferredStores = [];
      for (const spec of offload.stores) {
        this.checkJob(spec);
        this.trackStore(spec);
        if (spec.fence) this.completeStore(spec, out);
      }
      for (const spec of offload.loads) {
        this.checkJob(spec);
        const failed = this.loadFaults?.(spec, step) ?? [];
        for (const id of failed) {
          if (!spec.gpuBlockIds.includes(id)) throw new Error(`load fault names GPU block ${id}, not in job ${spec.jobId}`);
        }
        this.inFlight.push({ spec, completeAtStep: step + this.loadLatency, failedGpuBlockIds: failed });
      }
    } else {
      for (const spec of this.deferredStores) this.inFlight.push({ spec, completeAtStep: step + this.storeLatency, failedGpuBlockIds: [] });
      this.deferredStores = [];
    }

    // c. Loads that are due, or whose blocks this step reads or writes, land before the forward.
    const touched = this.inFlight.length > 0 ? this.blocksTouched(so) : new Set<number>();
    this.inFlight = this.inFlight.filter((job) => {
      if (job.spec.direction !== 'cpuToGpu') return true;
      const due = job.completeAtStep <= step || job.spec.gpuBlockIds.some((id) => touched.has(id));
      if (due) this.completeLoad(job, out);
      return !due;
    });

    this.forward(so, out);

    // d. This step's stores start at the next step.
    if (offload !== null) for (const spec of offload.stores) if (!spec.fence) this.deferredStores.push(spec);

    // e. Stores that completed read their blocks now, after this step's writes.
    this.inFlight = this.inFlight.filter((job) => {
      if (job.spec.direction !== 'gpuToCpu' || job.completeAtStep > step) return true;
      this.completeStore(job.spec, out);
      return false;
    });

    return out.toOutput(step);
  }

  // ---------------------------------------------------------------- forward

  private bindTables(so: SchedulerOutput): void {
    for (const r of so.requests) {
      if (r.blockIds !== null) {
        for (const id of r.blockIds) this.checkGpuBlock(id);
        this.tables.set(r.reqId, r.blockIds.slice());
        continue;
      }
      const table = this.tables.get(r.reqId);
      if (table === undefined) {
        throw new Error(`step ${so.step}: request '${r.reqId}' has no block table and none was sent`);
      }
      for (const id of r.newBlockIds) {
        this.checkGpuBlock(id);
        table.push(id);
      }
    }
  }

  private blocksTouched(so: SchedulerOutput): Set<number> {
    const touched = new Set<number>();
    for (const r of so.requests) {
      const table = this.tables.get(r.reqId) as number[];
      const end = r.startPosition + r.tokens.length;
      const n = Math.min(table.length, Math.ceil(end / this.blockSize));
      for (let i = 0; i < n; i++) touched.add(table[i]);
    }
    return touched;
  }

  private forward(so: SchedulerOutput, out: StepReport): void {
    const bs = this.blockSize;
    const init = chainInit(this.shape.modelSeed);
    for (const r of so.requests) {
      const table = this.tables.get(r.reqId) as number[];
      const end = r.startPosition + r.tokens.length;
      if (end > table.length * bs) {
        throw new Error(
          `step ${so.step}: request '${r.reqId}' computes up to position ${end - 1} but its table covers ${table.length * bs}`,
        );
      }
      for (let p = r.startPosition; p < end; p++) {
        const prev = p === 0 ? init : this.gpu[table[((p - 1) / bs) | 0] * bs + ((p - 1) % bs)];
        this.gpu[table[(p / bs) | 0] * bs + (p % bs)] = chainNext(prev, r.tokens[p - r.startPosition], p);
      }
    }
    // Digests after every write of the batch.
    for (const r of so.requests) {
      if (!r.sample) continue;
      const table = this.tables.get(r.reqId) as number[];
      const n = r.startPosition + r.tokens.length;
      let digest = 0;
      for (let p = 0; p < n; p++) {
        const slot = table[(p / bs) | 0] * bs + (p % bs);
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
      out.sampledTokens.set(r.reqId, sampleToken(digest, r.seed, n, this.shape.vocabSize));
    }
  }

  // ---------------------------------------------------------------- transfers

  private trackStore(spec: TransferJobSpec): void {
    if (spec.reqId === null) return;
    let jobs = this.storesByRequest.get(spec.reqId);
    if (jobs === undefined) {
      jobs = new Set();
      this.storesByRequest.set(spec.reqId, jobs);
    }
    jobs.add(spec.jobId);
  }

  /** A finished request reports finishedSending once every store it issued completed (never, if it stored nothing). */
  private noteFinished(reqId: string, out: StepReport): void {
    const jobs = this.storesByRequest.get(reqId);
    if (jobs === undefined) return;
    if (jobs.size === 0) {
      this.storesByRequest.delete(reqId);
      out.finishedSending.add(reqId);
    } else {
      this.finishedAwaitingStores.add(reqId);
    }
  }

  private flush(reqId: string, out: StepReport): void {
    const deferred = this.deferredStores.filter((s) => s.reqId === reqId);
    this.deferredStores = this.deferredStores.filter((s) => s.reqId !== reqId);
    for (const spec of deferred) this.completeStore(spec, out);
    this.inFlight = this.inFlight.filter((job) => {
      if (job.spec.direction !== 'gpuToCpu' || job.spec.reqId !== reqId) return true;
      this.completeStore(job.spec, out);
      return false;
    });
  }

  private completeStore(spec: TransferJobSpec, out: StepReport): void {
    const f = this.cpu.offloadFactor;
    const bs = this.blockSize;
    for (let k = 0; k < spec.gpuBlockIds.length; k++) {
      const dst = this.cpu.subBlock(spec.cpuBlockIds[(k / f) | 0], k % f);
      const src = spec.gpuBlockIds[k] * bs;
      dst.set(this.gpu.subarray(src, src + bs));
    }
    out.finishedJobs.push(this.result(spec, []));
    if (spec.reqId !== null) {
      const jobs = this.storesByRequest.get(spec.reqId);
      jobs?.delete(spec.jobId);
      if (jobs !== undefined && jobs.size === 0 && this.finishedAwaitingStores.has(spec.reqId)) {
        this.finishedAwaitingStores.delete(spec.reqId);
        this.storesByRequest.delete(spec.reqId);
        out.finishedSending.add(spec.reqId);
      }
    }
  }

  private completeLoad(job: InFlightJob, out: StepReport): void {
    const { spec, failedGpuBlockIds } = job;
    const f = this.cpu.offloadFactor;
    const bs = this.blockSize;
    const failed = new Set(failedGpuBlockIds);
    for (let k = 0; k < spec.gpuBlockIds.length; k++) {
      const gpuBlock = spec.gpuBlockIds[k];
      const dst = this.gpu.subarray(gpuBlock * bs, (gpuBlock + 1) * bs);
      if (failed.has(gpuBlock)) {
        for (let i = 0; i < bs; i++) dst[i] = mix((POISON ^ (gpuBlock * bs + i)) >>> 0);
        out.invalidBlockIds.add(gpuBlock);
        continue;
      }
      const j = k + spec.firstSubBlock;
      dst.set(this.cpu.subBlock(spec.cpuBlockIds[(j / f) | 0], j % f));
    }
    out.finishedJobs.push(this.result(spec, failedGpuBlockIds));
    if (spec.reqId !== null) out.finishedRecving.add(spec.reqId);
  }

  private result(spec: TransferJobSpec, failedGpuBlockIds: readonly number[]): JobResult {
    return {
      jobId: spec.jobId,
      direction: spec.direction,
      ok: failedGpuBlockIds.length === 0,
      failedGpuBlockIds: failedGpuBlockIds.slice(),
      bytes: spec.gpuBlockIds.length * this.bytesPerBlock,
      elapsedMs: 0,
    };
  }

  private checkJob(spec: TransferJobSpec): void {
    const f = this.cpu.offloadFactor;
    if (spec.direction === 'gpuToCpu' && spec.firstSubBlock !== 0) {
      throw new Error(`store job ${spec.jobId}: firstSubBlock must be 0, got ${spec.firstSubBlock}`);
    }
    if (spec.gpuBlockIds.length !== spec.cpuBlockIds.length * f - spec.firstSubBlock) {
      throw new Error(
        `job ${spec.jobId}: ${spec.gpuBlockIds.length} GPU blocks do not fill ${spec.cpuBlockIds.length} CPU blocks ` +
          `of ${f} from sub-block ${spec.firstSubBlock}`,
      );
    }
    for (const id of spec.gpuBlockIds) this.checkGpuBlock(id);
    for (const id of spec.cpuBlockIds) this.cpu.subBlock(id, 0);
  }

  private checkGpuBlock(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.numGpuBlocks) {
      throw new RangeError(`GPU block id ${id} is outside [0, ${this.numGpuBlocks})`);
    }
  }

  private fillGarbage(): void {
    // Never-written slots hold garbage, not zeros, so reading one gives a wrong token.
    for (let i = 0; i < this.gpu.length; i++) this.gpu[i] = mix((i ^ 0x5eed5eed) >>> 0);
  }
}

/** The pieces of one step's ModelRunnerOutput as they are gathered. */
class StepReport {
  readonly sampledTokens = new Map<string, number>();
  readonly finishedJobs: JobResult[] = [];
  readonly finishedSending = new Set<string>();
  readonly finishedRecving = new Set<string>();
  readonly invalidBlockIds = new Set<number>();

  toOutput(step: number): ModelRunnerOutput {
    return {
      step,
      sampledTokens: this.sampledTokens,
      finishedJobs: this.finishedJobs,
      finishedSending: this.finishedSending,
      finishedRecving: this.finishedRecving,
      invalidBlockIds: this.invalidBlockIds,
    };
  }
}
