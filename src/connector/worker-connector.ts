import type { Device, DeviceJobResult } from '../device/types.js';
import type { WorkerConnectorSwitches } from './worker-connector-switches.js';
import type {
  CopyJobCounts,
  CopyJobSpan,
  JobResult,
  KVConnectorOutput,
  OffloadStepMetadata,
  TransferJobSpec,
} from '../protocol/step-protocol.js';
import { copyJobBlocks, groupIntoCopyJobs, MAX_COPY_JOB_BYTES } from './copy-jobs.js';


/** What the connector holds between steps. */
export interface WorkerConnectorState {
  /** Transfer jobs submitted and not yet collected. */
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
  /** The device job that carried it (the id of that copy job's first transfer job). */
  readonly copyJobId: number;
}

/** One device job carrying one or more transfer jobs of one direction. */
interface CopyJob {
  readonly direction: TransferJobSpec['direction'];
  readonly members: readonly TransferJobSpec[];
  readonly gpuBlocks: number;
}

/**
 * The worker side of the offloading connector (docs/architecture.md, "One engine step"):
 * submits and tracks this rank's transfer jobs and reports their completion.
 * Transfer jobs submitted together (a step's stores, its fenced stores, its
 * loads, a flush) go to the device as few copy jobs (copy-jobs.ts); each
 * transfer job is reported when the copy job carrying it completed.
 */
export class WorkerConnector {
  /** Copy jobs on the device by id, in submission order. */
  private readonly inFlight = new Map<number, CopyJob>();
  /** Transfer job -> the copy job carrying it. */
  private readonly copyJobOf = new Map<number, number>();
  /** Stores of the previous step, submitted at the start of the next one. */
  private deferred: { spec: TransferJobSpec; issuedStep: number }[] = [];
  /** Store jobs (deferred or in flight) of each request. */
  private readonly storesByReq = new Map<string, Set<number>>();
  /** GPU block -> in-flight copy job loading it. */
  private readonly loadingBlocks = new Map<number, number>();
  /** Requests the scheduler finished whose stores are still running here. */
  private readonly finishedReqs = new Set<string>();
  private readonly log: TransferLogEntry[] = [];
  /** Finished copy jobs as the device timed them, until taken; null: not recorded (the default). */
  private spans: CopyJobSpan[] | null = null;

  constructor(
    private readonly device: Device,
    private readonly switches: WorkerConnectorSwitches = {},
    private readonly maxCopyJobBytes: number = MAX_COPY_JOB_BYTES,
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
    const submitNow: typeof this.deferred = [];
    for (const entry of this.deferred) {
      if (entry.spec.reqId !== null && flushed.has(entry.spec.reqId)) submitNow.push(entry);
      else keep.push(entry);
    }
    this.deferred = keep;
    this.submitAll(submitNow, step, 'flush');
    const waitFor: number[] = [];
    for (const reqId of reqIds) for (const jobId of this.storesByReq.get(reqId) ?? []) waitFor.push(jobId);
    await this.waitJobs(waitFor);
  }

  /**
   * Step b: submit the stores deferred from the previous step, then this
   * step's fenced write-back stores, then this step's loads (which wait for the
   * fenced stores: they may overwrite the same blocks). Returns the copy jobs
   * the forward must wait for.
   */
  startTransfers(step: number, meta: OffloadStepMetadata): number[] {
    const deferred = this.deferred;
    this.deferred = [];
    this.submitAll(deferred, step, 'start');
    const fencedStores = meta.stores.filter((spec) => spec.fence).map((spec) => ({ spec, issuedStep: step }));
    const fenced = this.submitAll(fencedStores, step, 'start');
    this.submitAll(meta.loads.map((spec) => ({ spec, issuedStep: step })), step, 'start', fenced);
    return fenced;
  }

  /** In-flight copy jobs loading any of `blockIds` (the forward that reads them must wait). */
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
    const now: typeof this.deferred = [];
    for (const spec of meta.stores) {
      if (spec.fence) continue;
      if (spec.reqId !== null) this.storesOf(spec.reqId).add(spec.jobId);
      if (this.switches.submitStoresImmediately) now.push({ spec, issuedStep: step });
      else this.deferred.push({ spec, issuedStep: step });
    }
    this.submitAll(now, step, 'after-forward');
  }

  /** The scheduler finished these requests: report each once its stores are done. */
  markFinished(reqIds: readonly string[]): void {
    for (const reqId of reqIds) this.finishedReqs.add(reqId);
  }

  /** Resolves once the copy jobs carrying these (submitted) transfer jobs finished. */
  async waitJobs(jobIds: readonly number[]): Promise<void> {
    const copyJobs = new Set<number>();
    for (const jobId of jobIds) {
      const copyJob = this.copyJobOf.get(jobId);
      if (copyJob !== undefined) copyJobs.add(copyJob);
    }
    if (copyJobs.size > 0) await this.device.waitJobs([...copyJobs]);
  }

  /** Step e: collect finished jobs and what they mean for requests and blocks. */
  collect(): KVConnectorOutput {
    const finishedJobs: JobResult[] = [];
    const finishedRecving: string[] = [];
    const invalidBlockIds: number[] = [];
    const copyJobs = { gpuToCpu: 0, cpuToGpu: 0 };
    for (const result of this.device.pollFinished()) {
      const copyJob = this.inFlight.get(result.jobId);
      if (!copyJob) continue;
      this.inFlight.delete(result.jobId);
      this.spans?.push(copyJobSpan(copyJob, result));
      copyJobs[copyJob.direction] += 1;
      for (const member of memberResults(copyJob, result)) {
        const { spec } = member;
        this.copyJobOf.delete(spec.jobId);
        finishedJobs.push(this.toJobResult(member.result));
        if (spec.direction === 'cpuToGpu') {
          for (const id of spec.gpuBlockIds) if (this.loadingBlocks.get(id) === result.jobId) this.loadingBlocks.delete(id);
          if (spec.reqId !== null) finishedRecving.push(spec.reqId);
          for (const id of member.result.failedGpuBlockIds) invalidBlockIds.push(id);
        } else if (spec.reqId !== null) {
          const stores = this.storesByReq.get(spec.reqId);
          stores?.delete(spec.jobId);
          if (stores && stores.size === 0) this.storesByReq.delete(spec.reqId);
        }
      }
    }
    const finishedSending: string[] = [];
    for (const reqId of this.finishedReqs) {
      if (this.storesByReq.has(reqId)) continue;
      finishedSending.push(reqId);
      this.finishedReqs.delete(reqId);
    }
    const output: KVConnectorOutput = { finishedJobs, finishedSending, finishedRecving, invalidBlockIds };
    return copyJobs.gpuToCpu + copyJobs.cpuToGpu > 0 ? { ...output, copyJobs: copyJobs satisfies CopyJobCounts } : output;
  }

  /** Transfer jobs submitted and not collected, plus stores waiting for the next step. */
  pendingCount(): number {
    return this.copyJobOf.size + this.deferred.length;
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
    const dropped = this.device.pollFinished();
    // Their results are dropped, but the device ran them: a trace keeps them.
    if (this.spans !== null) {
      for (const result of dropped) {
        const copyJob = this.inFlight.get(result.jobId);
        if (copyJob) this.spans.push(copyJobSpan(copyJob, result));
      }
    }
    this.inFlight.clear();
    this.copyJobOf.clear();
    this.deferred = [];
    this.storesByReq.clear();
    this.loadingBlocks.clear();
    this.finishedReqs.clear();
  }

  state(): WorkerConnectorState {
    return {
      inFlightJobs: this.copyJobOf.size,
      deferredStores: this.deferred.length,
      loadingBlocks: this.loadingBlocks.size,
      finishingRequests: this.finishedReqs.size,
    };
  }

  transferLog(): readonly TransferLogEntry[] {
    return this.log;
  }

  /** From now on, keeps every finished copy job as the device timed it, for takeCopyJobSpans. */
  recordCopyJobSpans(): void {
    this.spans ??= [];
  }

  /** The copy jobs finished since the last call, as the device timed them (none unless recordCopyJobSpans was called). */
  takeCopyJobSpans(): CopyJobSpan[] {
    const spans = this.spans;
    if (spans === null || spans.length === 0) return [];
    this.spans = [];
    return spans;
  }

  /** Oldest in-flight copy job of each direction (Map keeps submission order). */
  private oldestInFlightPerDirection(): number[] {
    let store: number | null = null;
    let load: number | null = null;
    for (const [jobId, job] of this.inFlight) {
      // A job the device holds back (the stall fault) makes no progress by being waited on; held jobs are the newest.
      if (this.device.holds?.(jobId) === true) continue;
      if (job.direction === 'gpuToCpu') store ??= jobId;
      else load ??= jobId;
      if (store !== null && load !== null) break;
    }
    return [store, load].filter((id): id is number => id !== null);
  }

  /** A job's result as the device gave it, unless a switch reports a failed store as ok. */
  private toJobResult(r: JobResult): JobResult {
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

  /**
   * Submits transfer jobs of one direction as copy jobs (each job alone under
   * the `separateCopyJobs` switch); returns the copy jobs' ids.
   */
  private submitAll(
    entries: readonly { spec: TransferJobSpec; issuedStep: number }[],
    step: number,
    phase: TransferLogEntry['phase'],
    after: readonly number[] = [],
  ): number[] {
    if (entries.length === 0) return [];
    const specs = entries.map((e) => e.spec);
    const issuedStep = new Map(entries.map((e) => [e.spec.jobId, e.issuedStep]));
    const groups = this.switches.separateCopyJobs
      ? specs.map((spec) => [spec])
      : groupIntoCopyJobs(specs, this.device.info.bytesPerGpuBlock, this.maxCopyJobBytes);
    return groups.map((group) => this.submitCopyJob(group, issuedStep, step, phase, after));
  }

  private submitCopyJob(
    members: readonly TransferJobSpec[],
    issuedStep: ReadonlyMap<number, number>,
    step: number,
    phase: TransferLogEntry['phase'],
    after: readonly number[],
  ): number {
    const first = members[0];
    const copyJobId = first.jobId;
    const blocks = copyJobBlocks(members);
    this.device.submitTransfer({
      jobId: copyJobId,
      direction: first.direction,
      gpuBlockIds: blocks.gpuBlockIds,
      cpuBlockIds: blocks.cpuBlockIds,
      firstSubBlock: blocks.firstSubBlock,
      orderAfterCompute: first.direction === 'gpuToCpu' ? !this.switches.storesIgnoreCompute : undefined,
      after: after.length > 0 ? after : undefined,
    });
    this.inFlight.set(copyJobId, { direction: first.direction, members, gpuBlocks: blocks.gpuBlockIds.length });
    if (first.direction === 'cpuToGpu') for (const id of blocks.gpuBlockIds) this.loadingBlocks.set(id, copyJobId);
    for (const spec of members) {
      this.copyJobOf.set(spec.jobId, copyJobId);
      if (this.switches.recordTransfers) {
        this.log.push({
          jobId: spec.jobId,
          direction: spec.direction,
          reqId: spec.reqId,
          issuedStep: issuedStep.get(spec.jobId) ?? step,
          submittedStep: step,
          phase,
          copyJobId,
        });
      }
    }
    return copyJobId;
  }
}

/** A finished copy job on this rank's device, as the device ran and timed it. */
function copyJobSpan(copyJob: CopyJob, result: DeviceJobResult): CopyJobSpan {
  return {
    copyJobId: result.jobId,
    transferJobIds: copyJob.members.map((spec) => spec.jobId),
    direction: copyJob.direction,
    bytes: result.bytes,
    ok: result.ok,
    ...(result.copyPath !== undefined ? { copyPath: result.copyPath } : {}),
    ...(result.error !== undefined ? { error: result.error } : {}),
    startMs: result.startMs ?? -1,
    submitMs: result.submitMs ?? -1,
    enqueueMs: result.enqueueMs ?? -1,
    elapsedMs: result.elapsedMs,
  };
}

/**
 * Each transfer job's part of its copy job's result. A load job failed where
 * the device reported any of its blocks failed (a copy job the device could
 * not run reports all its blocks, so every job in it fails); a store job
 * shares its copy job's outcome. Bytes and device time are split by GPU
 * blocks, so summed over a copy job's jobs they are the copy job's own.
 */
function memberResults(copyJob: CopyJob, result: DeviceJobResult): { spec: TransferJobSpec; result: JobResult }[] {
  const failed = result.failedGpuBlockIds.length > 0 ? new Set(result.failedGpuBlockIds) : null;
  // A failed load that names no block: nothing it wrote can be trusted.
  const allFailed = !result.ok && copyJob.direction === 'cpuToGpu' && failed === null;
  let bytesLeft = result.bytes;
  return copyJob.members.map((spec, i) => {
    const share = copyJob.gpuBlocks > 0 ? spec.gpuBlockIds.length / copyJob.gpuBlocks : 0;
    const last = i === copyJob.members.length - 1;
    const bytes = last ? bytesLeft : Math.floor(result.bytes * share);
    bytesLeft -= bytes;
    let failedGpuBlockIds: readonly number[] = [];
    if (copyJob.direction === 'cpuToGpu') {
      failedGpuBlockIds = allFailed ? [...spec.gpuBlockIds] : failed === null ? [] : spec.gpuBlockIds.filter((id) => failed.has(id));
    }
    const ok = copyJob.direction === 'cpuToGpu' ? failedGpuBlockIds.length === 0 : result.ok;
    const member: JobResult & Pick<DeviceJobResult, 'error' | 'copyPath'> = {
      jobId: spec.jobId,
      direction: spec.direction,
      ok,
      failedGpuBlockIds,
      bytes,
      elapsedMs: result.elapsedMs * share,
      ...(!ok && result.error !== undefined ? { error: result.error } : {}),
      ...(result.copyPath !== undefined ? { copyPath: result.copyPath } : {}),
    };
    return { spec, result: member };
  });
}
