import type { Device, DeviceJobResult } from '../device/types.js';
import type { WorkerConnectorSwitches } from './worker-connector-switches.js';
import type {
  JobResult,
  KVConnectorOutput,
  OffloadStepMetadata,
  TransferJobSpec,
} from '../protocol/step-protocol.js';


/** What the connector holds between steps. */
export interface WorkerConnectorState {
  readonly inFlightJobs: number;
  readonly deferredStores: number;
  readonly loadingBlocks: number;
  readonly finishingRequests: number;
}

/** When and where each job was submitted, for ordering assertions. */
export interface TransferLogEntry {
  readonly jobId: number;
  readonly direction: TransferJobSpec['direction'];
  readonly reqId: string | null;
  /** Step whose metadata carried the job. */
  readonly issuedStep: number;
  /** Step during which the rank submitted it. */
  readonly submittedStep: number;
  readonly phase: 'flush' | 'start' | 'after-forward';
}

interface InFlightJob {
  readonly spec: TransferJobSpec;
}

/**
 * The worker side of the offloading connector (docs/architecture.md, "One engine step"):
 * submits and tracks this rank's transfer jobs and reports their completion.
 */
export class WorkerConnector {
  private readonly inFlight = new Map<number, InFlightJob>();
  /** Stores of the previous step, submitted at the start of the next one. */
  private deferred: { spec: TransferJobSpec; issuedStep: number }[] = [];
  /** Store jobs (deferred or in flight) of each request. */
  private readonly storesByReq = new Map<string, Set<number>>();
  /** GPU block -> in-flight load job writing it. */
  private readonly loadingBlocks = new Map<number, number>();
  /** Requests the scheduler finished whose stores are still running here. */
  private readonly finishedReqs = new Set<string>();
  private readonly log: TransferLogEntry[] = [];

  constructor(
    private readonly device: Device,
    private readonly switches: WorkerConnectorSwitches = {},
  ) {}

  /**
   * Step a: submit the deferred stores of preempted requests and wait until
   * every store reading their blocks finished, before anything this step can
   * overwrite those blocks.
   */
  async flushPreempted(step: number, reqIds: readonly string[]): Promise<void> {
    if (reqIds.length === 0 || this.switches.skipPreemptionFlush) return;
    const flushed = new Set(reqIds);
    const keep: typeof this.deferred = [];
    for (const entry of this.deferred) {
      if (entry.spec.reqId !== null && flushed.has(entry.spec.reqId)) this.submit(entry.spec, entry.issuedStep, step, 'flush');
      else keep.push(entry);
    }
    this.deferred = keep;
    const waitFor: number[] = [];
    for (const reqId of reqIds) for (const jobId of this.storesByReq.get(reqId) ?? []) waitFor.push(jobId);
    if (waitFor.length > 0) await this.device.waitJobs(waitFor);
  }

  /**
   * Step b: submit the stores deferred from the previous step, then this
   * step's fenced write-back stores, then this step's loads (which wait for the
   * fenced stores: they may overwrite the same blocks). Returns the jobs the
   * forward must wait for.
   */
  startTransfers(step: number, meta: OffloadStepMetadata): number[] {
    for (const { spec, issuedStep } of this.deferred) this.submit(spec, issuedStep, step, 'start');
    this.deferred = [];
    const fenced: number[] = [];
    for (const spec of meta.stores) {
      if (!spec.fence) continue;
      this.submit(spec, step, step, 'start');
      fenced.push(spec.jobId);
    }
    for (const spec of meta.loads) this.submit(spec, step, step, 'start', fenced);
    return fenced;
  }

  /** In-flight loads writing any of `blockIds` (the forward that reads them must wait). */
  loadsWriting(blockIds: Iterable<number>): number[] {
    if (this.loadingBlocks.size === 0) return [];
    const jobs = new Set<number>();
    for (const id of blockIds) {
      const job = this.loadingBlocks.get(id);
      if (job !== undefined) jobs.add(job);
    }
    return [...jobs];
  }

  /**
   * Step d: queue this step's (non-fenced) stores. They are submitted at the
   * start of the next step, ordered after the compute that wrote their blocks.
   */
  queueStores(step: number, meta: OffloadStepMetadata): void {
    for (const spec of meta.stores) {
      if (spec.fence) continue;
      if (spec.reqId !== null) this.storesOf(spec.reqId).add(spec.jobId);
      if (this.switches.submitStoresImmediately) this.submit(spec, step, step, 'after-forward');
      else this.deferred.push({ spec, issuedStep: step });
    }
  }

  /** The scheduler finished these requests: report each once its stores are done. */
  markFinished(reqIds: readonly string[]): void {
    for (const reqId of reqIds) this.finishedReqs.add(reqId);
  }

  /** Step e: collect finished jobs and what they mean for requests and blocks. */
  collect(): KVConnectorOutput {
    const finishedJobs: JobResult[] = [];
    const finishedRecving: string[] = [];
    const invalidBlockIds: number[] = [];
    for (const result of this.device.pollFinished()) {
      const job = this.inFlight.get(result.jobId);
      if (!job) continue;
      this.inFlight.delete(result.jobId);
      finishedJobs.push(this.toJobResult(result));
      const { spec } = job;
      if (spec.direction === 'cpuToGpu') {
        for (const id of spec.gpuBlockIds) if (this.loadingBlocks.get(id) === spec.jobId) this.loadingBlocks.delete(id);
        if (spec.reqId !== null) finishedRecving.push(spec.reqId);
        for (const id of result.failedGpuBlockIds) invalidBlockIds.push(id);
      } else if (spec.reqId !== null) {
        const stores = this.storesByReq.get(spec.reqId);
        stores?.delete(spec.jobId);
        if (stores && stores.size === 0) this.storesByReq.delete(spec.reqId);
      }
    }
    const finishedSending: string[] = [];
    for (const reqId of this.finishedReqs) {
      if (this.storesByReq.has(reqId)) continue;
      finishedSending.push(reqId);
      this.finishedReqs.delete(reqId);
    }
    return { finishedJobs, finishedSending, finishedRecving, invalidBlockIds };
  }

  /** Jobs submitted and not finished, plus stores waiting for the next step. */
  pendingCount(): number {
    return this.inFlight.size + this.deferred.length;
  }

  /**
   * Waits (bounded) until some in-flight job finished, so idle steps do not
   * spin. Each direction has one copy stream that runs its jobs in submission
   * order, so the next job to finish is the oldest one of some direction:
   * waiting on those (at most two) is waiting for any job.
   */
  async waitForProgress(timeoutMs: number): Promise<void> {
    const oldest = this.oldestInFlightPerDirection();
    if (oldest.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([Promise.any(oldest.map((id) => this.device.waitJobs([id]))), timeout]);
    clearTimeout(timer);
  }

  /**
   * Waits for every submitted job, then forgets all state (the ranks agreed a
   * rank's tier was lost). The wait matters: a job of the old state landing
   * after the reset would write blocks the new state has given to others.
   */
  async drainAndReset(): Promise<void> {
    const ids = [...this.inFlight.keys()];
    if (ids.length > 0 && !this.switches.resetWithoutDrain) await this.device.waitJobs(ids);
    this.device.pollFinished();
    this.inFlight.clear();
    this.deferred = [];
    this.storesByReq.clear();
    this.loadingBlocks.clear();
    this.finishedReqs.clear();
  }

  state(): WorkerConnectorState {
    return {
      inFlightJobs: this.inFlight.size,
      deferredStores: this.deferred.length,
      loadingBlocks: this.loadingBlocks.size,
      finishingRequests: this.finishedReqs.size,
    };
  }

  transferLog(): readonly TransferLogEntry[] {
    return this.log;
  }

  /** Oldest in-flight job of each direction (Map keeps submission order). */
  private oldestInFlightPerDirection(): number[] {
    let store: number | null = null;
    let load: number | null = null;
    for (const [jobId, job] of this.inFlight) {
      // A job the device holds back (the stall fault) makes no progress by being waited on; held jobs are the newest.
      if (this.device.holds?.(jobId) === true) continue;
      if (job.spec.direction === 'gpuToCpu') store ??= jobId;
      else load ??= jobId;
      if (store !== null && load !== null) break;
    }
    return [store, load].filter((id): id is number => id !== null);
  }

  /** The device's result as it is, unless a switch reports a failed store as ok. */
  private toJobResult(r: DeviceJobResult): JobResult {
    if (r.ok || r.direction !== 'gpuToCpu' || !this.switches.reportFailedStoresAsOk) return r;
    return { ...r, ok: true };
  }

  private storesOf(reqId: string): Set<number> {
    let set = this.storesByReq.get(reqId);
    if (!set) {
      set = new Set();
      this.storesByReq.set(reqId, set);
    }
    return set;
  }

  private submit(
    spec: TransferJobSpec,
    issuedStep: number,
    step: number,
    phase: TransferLogEntry['phase'],
    after: readonly number[] = [],
  ): void {
    this.device.submitTransfer({
      jobId: spec.jobId,
      direction: spec.direction,
      gpuBlockIds: spec.gpuBlockIds,
      cpuBlockIds: spec.cpuBlockIds,
      firstSubBlock: spec.firstSubBlock,
      orderAfterCompute: spec.direction === 'gpuToCpu' ? !this.switches.storesIgnoreCompute : undefined,
      after: after.length > 0 ? after : undefined,
    });
    this.inFlight.set(spec.jobId, { spec });
    if (spec.direction === 'cpuToGpu') for (const id of spec.gpuBlockIds) this.loadingBlocks.set(id, spec.jobId);
    if (this.switches.recordTransfers) {
      this.log.push({ jobId: spec.jobId, direction: spec.direction, reqId: spec.reqId, issuedStep, submittedStep: step, phase });
    }
  }
}
