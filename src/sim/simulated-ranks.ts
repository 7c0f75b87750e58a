import type { KvGeometry } from '../core/kv-geometry.js';
import type { TransferSubmission } from '../device/types.js';
import type { RankDeath } from '../faults/rank-faults.js';
import type { ModelRunnerOutput, RankStepOutput, SchedulerOutput, TransferJobSpec } from '../protocol/step-protocol.js';
import type { RankSetup } from '../rank/rank-protocol.js';
import { RankWorker, type RankWorkerHost } from '../rank/rank-worker.js';
import { KVOutputAggregator } from '../runtime/aggregator.js';
import type { PositionSums } from './position-sums.js';
import { SimulatedDevice, type SimulatedLink } from './simulated-device.js';

/** Chooses which GPU blocks of a load job fail on a rank (they are poisoned and reported invalid). */
export type LoadFaultInjector = (job: TransferJobSpec, step: number, rank: number) => readonly number[];

/** A value for every rank, or one per rank. */
export type PerRank<T> = T | readonly T[];

export interface SimulatedRanksOptions {
  /**
   * One setup per rank, as the assembly builds them (rankSetups): the
   * geometry, pool sizes, each rank's fault rules, the worker-side switches.
   */
  readonly setups: readonly RankSetup[];
  /** Merges the ranks' outputs; a fresh one by default. */
  readonly aggregator?: KVOutputAggregator;
  /** Steps a load takes when nothing waits for it (default 1); per rank, ranks can finish a job in different steps. */
  readonly loadLatencySteps?: PerRank<number>;
  /** Steps a store takes when nothing waits for it (default 1). */
  readonly storeLatencySteps?: PerRank<number>;
  readonly loadFaults?: LoadFaultInjector | null;
  /** Position sums to share between runs (tp = 1 only: they cover every head). */
  readonly positionSums?: PositionSums;
  /** Transfers on a modelled host link (SimulatedDevice's `link`); each rank has its own link. */
  readonly link?: SimulatedLink;
}

/** A rank's injected death, surfaced to the caller of the step it happened in. */
export class SimulatedRankDeath extends Error {
  constructor(
    readonly rank: number,
    readonly death: RankDeath,
    when: string,
  ) {
    super(`rank ${rank} ${death.kind === 'hang' ? 'hung' : 'crashed'} ${when}`);
    this.name = 'SimulatedRankDeath';
  }
}

/**
 * The executor's in-process counterpart: one production RankWorker per rank,
 * each over a SimulatedDevice, run in the calling thread, their outputs
 * merged by the production KVOutputAggregator. Every step runs the worker side
 * of the step protocol exactly as a rank thread does (docs/architecture.md,
 * "One engine step"), only on a step clock instead of a GPU.
 */
export class SimulatedRanks {
  readonly tp: number;
  readonly geometry: KvGeometry;
  private readonly options: SimulatedRanksOptions;
  private workers: RankWorker[] = [];
  private deviceList: SimulatedDevice[] = [];
  private aggregator: KVOutputAggregator;
  private ready: Promise<void>;
  private loadFaults: LoadFaultInjector | null;
  private readonly specs = new Map<number, TransferJobSpec>();
  private openCount = 0;
  private resetCount = 0;
  private lastOutputs: readonly RankStepOutput[] = [];

  constructor(options: SimulatedRanksOptions) {
    this.options = options;
    const first = options.setups[0];
    if (first === undefined) throw new RangeError('setups: give one setup per rank, got none');
    this.geometry = first.geometry;
    this.tp = this.geometry.tp;
    if (options.setups.length !== this.tp || options.setups.some((s, rank) => s.rank !== rank || s.geometry !== this.geometry)) {
      throw new RangeError(`setups: give one setup per rank 0..${this.tp - 1}, in rank order and of one geometry`);
    }
    if (options.positionSums !== undefined && this.tp !== 1) throw new RangeError('shared positionSums cover every head: tp must be 1');
    this.loadFaults = options.loadFaults ?? null;
    this.aggregator = options.aggregator ?? new KVOutputAggregator(this.tp, this.geometry.model.vocabSize);
    this.ready = this.open();
  }

  get blockSize(): number {
    return this.geometry.blockSize;
  }

  /** The ranks' devices, in rank order (replaced by restart()). */
  get devices(): readonly SimulatedDevice[] {
    return this.deviceList;
  }

  /** Each rank's output of the last step, in rank order (before aggregation). */
  get rankOutputs(): readonly RankStepOutput[] {
    return this.lastOutputs;
  }

  setLoadFaults(injector: LoadFaultInjector | null): void {
    this.loadFaults = injector;
  }

  /** Writes a CPU block's chain states on every rank (each rank holds its heads of the same positions). */
  writeCpuStates(cpuBlockId: number, states: ArrayLike<number>): void {
    for (const device of this.deviceList) device.cpu.writeBlock(cpuBlockId, states);
  }

  /** Sets the modelled time (ns) the ranks' links are read against. */
  setTime(nowNs: number): void {
    for (const device of this.deviceList) device.setTime(nowNs);
  }

  /** The earliest time a transfer on any rank's link is due (ns), or null when none is pending. */
  nextDueNs(): number | null {
    let next: number | null = null;
    for (const device of this.deviceList) {
      const due = device.nextDueNs();
      if (due !== null && (next === null || due < next)) next = due;
    }
    return next;
  }

  /** Runs one step on every rank (in rank order) and merges their outputs. */
  async execute(step: SchedulerOutput): Promise<ModelRunnerOutput> {
    await this.ready;
    if (step.offload !== null) {
      for (const spec of step.offload.loads) this.specs.set(spec.jobId, spec);
    }
    const outputs: RankStepOutput[] = [];
    for (let rank = 0; rank < this.tp; rank++) {
      this.deviceList[rank].advanceTo(step.step);
      outputs.push(await this.workers[rank].executeStep(step));
    }
    this.lastOutputs = outputs;
    const merged = this.aggregator.aggregate(outputs, step);
    for (const job of merged.finishedJobs) this.specs.delete(job.jobId);
    return merged;
  }

  /** Jobs submitted or deferred and not yet reported, summed over ranks. */
  async pendingJobs(): Promise<number> {
    await this.ready;
    let total = 0;
    for (const worker of this.workers) total += await worker.pendingJobs();
    return total;
  }

  /** Each rank's transfer submissions, in order (recorded only under the `recordTransfers` switch). */
  async transferLogs(): Promise<Awaited<ReturnType<RankWorker['transferLog']>>[]> {
    await this.ready;
    return Promise.all(this.workers.map((worker) => worker.transferLog()));
  }

  /**
   * Every rank was lost: each is replaced by a fresh RankWorker over a fresh
   * device (GPU blocks hold garbage, the CPU tier is empty), and partial
   * reports of the old ranks are forgotten, as the engine does after restarting
   * its ranks. The caller resets the scheduler (Scheduler.resetForRankLoss).
   */
  async restart(): Promise<void> {
    await this.ready;
    for (const worker of this.workers) await worker.shutdown();
    this.aggregator.reset();
    this.specs.clear();
    this.ready = this.open();
    await this.ready;
    this.resetCount += 1;
    for (const worker of this.workers) await worker.reset(this.resetCount);
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    for (const worker of this.workers) await worker.shutdown();
  }

  private async open(): Promise<void> {
    const o = this.options;
    this.openCount += 1;
    const devices: SimulatedDevice[] = [];
    const workers: RankWorker[] = [];
    for (const setup of o.setups) {
      const rank = setup.rank;
      const device = new SimulatedDevice({
        geometry: setup.geometry,
        rank,
        numGpuBlocks: setup.numGpuBlocks,
        numCpuBlocks: setup.numCpuBlocks,
        loadLatencySteps: perRank(o.loadLatencySteps, rank, 1),
        storeLatencySteps: perRank(o.storeLatencySteps, rank, 1),
        loadFaults: (job, step) => this.injectedFailures(job, step, rank),
        positionSums: o.positionSums,
        link: o.link,
      });
      devices.push(device);
      workers.push(new RankWorker(inProcessHost(device)));
    }
    this.deviceList = devices;
    this.workers = workers;
    for (const setup of o.setups) {
      await workers[setup.rank].init({ ...setup, openCount: this.openCount, loadFailuresBefore: 0 });
    }
  }

  /**
   * The injector's failed blocks for each load job a device job carries: a
   * rank sends a step's loads as one copy job (their GPU blocks end to end,
   * under the first one's id), and no GPU block is loaded by two jobs in
   * flight, so each block run after the first starts at the job that loads
   * its first block.
   */
  private injectedFailures(job: TransferSubmission, step: number, rank: number): readonly number[] {
    if (this.loadFaults === null) return [];
    const first = this.specs.get(job.jobId);
    if (first === undefined) throw new Error(`rank ${rank} loads job ${job.jobId}, which no step issued`);
    const failed: number[] = [];
    const ids = job.gpuBlockIds;
    let spec: TransferJobSpec | undefined = first;
    for (let at = 0; at < ids.length; at += spec.gpuBlockIds.length) {
      spec = at === 0 ? first : this.loadStartingAt(ids[at]);
      if (spec === undefined) throw new Error(`rank ${rank}: job ${job.jobId} loads GPU block ${ids[at]}, which no issued load starts at`);
      for (const id of this.loadFaults(spec, step, rank)) failed.push(id);
    }
    return failed;
  }

  private loadStartingAt(gpuBlockId: number): TransferJobSpec | undefined {
    for (const spec of this.specs.values()) if (spec.gpuBlockIds[0] === gpuBlockId) return spec;
    return undefined;
  }
}

function perRank(value: PerRank<number> | undefined, rank: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === 'number') return value;
  const v = (value as readonly number[])[rank];
  if (v === undefined) throw new RangeError(`no value given for rank ${rank}`);
  return v;
}

/** Opens the prepared device; an injected death surfaces as an error of the step it happened in. */
function inProcessHost(device: SimulatedDevice): RankWorkerHost {
  return {
    openDevice: async () => device,
    idleWaitMs: 0,
    die: async (death, when) => {
      throw new SimulatedRankDeath(device.rank, death, when);
    },
  };
}
