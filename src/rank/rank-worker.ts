import { performance } from 'node:perf_hooks';
import type { TransferLogEntry } from '../connector/worker-connector.js';
import { cudaDeviceCount } from '../device/native.js';
import type { Device, DeviceOptions, ForwardBatch } from '../device/types.js';
import { InjectedLoadFailures } from '../faults/fault-ledger.js';
import { RankFaults, type RankDeath } from '../faults/rank-faults.js';
import { StallingDevice } from '../faults/stalling-device.js';
import type { ForwardSpan, RankDeviceSpans, RankStepOutput, ScheduledRequest, SchedulerOutput } from '../protocol/step-protocol.js';
import type { RankFaultStats, RankInit, RankReady, RankState, RankWorkerApi } from './rank-protocol.js';
import { RankTiers } from './rank-tiers.js';

/** How long an idle step waits for an in-flight transfer before answering. */
const IDLE_WAIT_MS = 2;

/**
 * What a RankWorker needs from where it runs: how to open its device, and how
 * to carry out an injected death. A rank thread (workers/rank-thread.ts) opens
 * the native addon and ends the thread; an in-process caller can open another
 * Device and handle deaths its own way.
 */
export interface RankWorkerHost {
  openDevice(options: DeviceOptions): Promise<Device>;
  /** Carries out an injected death; the returned promise never settles. */
  die(death: RankDeath, when: string): Promise<never>;
  /**
   * How long a step with nothing to compute waits for an in-flight transfer
   * (default 2 ms). 0 on a step-clocked device, where a job lands only when
   * its step comes or something waits for it.
   */
  readonly idleWaitMs?: number;
}

/**
 * One tensor-parallel rank: owns its Device and runs the step protocol of
 * docs/architecture.md, "One engine step" for every SchedulerOutput the executor sends.
 */
export class RankWorker implements RankWorkerApi {
  private device: Device | null = null;
  /** The tiers below the GPU: the CPU tier's worker side and the remote tier, composed. */
  private tiers: RankTiers | null = null;
  private faults: RankFaults | null = null;
  /** The device behind the `stall` fault, when a rule of this rank stalls. */
  private stalling: StallingDevice | null = null;
  private rank = -1;
  /** Which device of this rank is open (RankInit.openCount); traced spans name it. */
  private openCount = 0;
  /** Whether steps report their device spans (RankInit.deviceTrace). */
  private traceDevice = false;
  /** Block table of every request the workers know about. */
  private readonly tables = new Map<string, number[]>();
  /** Which of this rank's failed load blocks the fault plan injected. */
  private readonly injected = new InjectedLoadFailures();

  constructor(private readonly host: RankWorkerHost) {}

  async init(init: RankInit): Promise<RankReady> {
    const deviceIndex = init.backend === 'cuda' ? init.rank % Math.max(1, cudaDeviceCount()) : 0;
    this.rank = init.rank;
    this.openCount = init.openCount;
    this.traceDevice = init.deviceTrace === true;
    const { geometry } = init;
    const faults = new RankFaults(init.faultRules, init.faultSeed, init.rank, init.loadFailuresBefore);
    const opened = await this.host.openDevice({
      backend: init.backend,
      rank: init.rank,
      deviceIndex,
      geometry,
      numGpuBlocks: init.numGpuBlocks,
      numCpuBlocks: init.numCpuBlocks,
      copyMethod: init.copyMethod,
      ...(init.hostLink === undefined ? {} : { hostLink: init.hostLink }),
    });
    this.stalling = faults.stalls ? new StallingDevice(opened) : null;
    const device = this.stalling ?? opened;
    this.device = device;
    this.tiers = await RankTiers.open(device, init);
    this.faults = faults;
    await this.die(this.faults.deathAtOpen(init.openCount), `after opening its device (open ${init.openCount})`);
    const info = device.info;
    return {
      rank: init.rank,
      openCount: init.openCount,
      backend: info.backend,
      deviceName: info.deviceName,
      deviceIndex,
      bytesPerGpuBlock: info.bytesPerGpuBlock,
      bytesPerCpuBlock: info.bytesPerCpuBlock,
      gpuBytes: info.gpuBytes,
      cpuBytes: info.cpuBytes,
    };
  }

  async executeStep(step: SchedulerOutput): Promise<RankStepOutput> {
    const device = this.requireDevice();
    const tiers = this.tiers!;
    const started = performance.now();
    await this.applyFaults(step.step);

    const meta = step.offload;
    // a. The tiers take the step's metadata; preempted requests' stores read their blocks before anything can overwrite them.
    await tiers.beginStep(step.step, meta);
    for (const reqId of step.preemptedReqIds) this.tables.delete(reqId);
    for (const reqId of step.finishedReqIds) this.tables.delete(reqId);
    tiers.markFinished(step.finishedReqIds);

    // b. Last step's stores, fenced write-backs, then this step's loads.
    const fenced = meta ? tiers.startTransfers(step.step, meta) : [];

    // c. The forward waits (on the device) for fenced stores and for loads writing blocks it reads.
    const enteringBlocks = this.updateTables(step.requests);
    const after = [...fenced, ...tiers.loadsWriting(enteringBlocks)];
    let forwardMs = 0;
    let digests: Uint32Array | null = null;
    const forward = step.requests.length > 0 ? this.forward(device, step.requests, after, step.computeNs) : null;

    // d. This step's stores, submitted at the next step's start.
    if (meta) tiers.queueStores(step.step, meta);

    if (forward) {
      const t0 = performance.now();
      digests = await forward;
      forwardMs = performance.now() - t0;
    } else {
      const idleWaitMs = this.host.idleWaitMs ?? IDLE_WAIT_MS;
      if (idleWaitMs > 0) await tiers.waitForProgress(idleWaitMs);
    }

    // e. Report.
    const output = tiers.collect();
    let failedBlocks = 0;
    for (const job of output.finishedJobs) failedBlocks += job.failedGpuBlockIds.length;
    let injectedLoadFailures = 0;
    if (failedBlocks > 0) {
      this.faults!.noteLoadFailures(failedBlocks);
      injectedLoadFailures = this.injected.claim(device.faultCounters().loadBlocksFailed, failedBlocks);
    }
    const sampledReqIds: string[] = [];
    const sampledDigests: number[] = [];
    step.requests.forEach((req, i) => {
      if (!req.sample) return;
      sampledReqIds.push(req.reqId);
      sampledDigests.push(digests![i]);
    });
    return {
      rank: this.rank,
      step: step.step,
      sampledReqIds,
      digests: sampledDigests,
      connector: output,
      stepMs: performance.now() - started,
      forwardMs,
      injectedLoadFailures,
      ...(this.traceDevice ? { deviceSpans: this.deviceSpans(device, tiers, forward === null ? null : step.requests) } : {}),
    };
  }

  /** The step's forward (when it ran one) and the copy jobs collected with it, as the device timed them. */
  private deviceSpans(device: Device, tiers: RankTiers, computed: readonly ScheduledRequest[] | null): RankDeviceSpans {
    let forward: ForwardSpan | null = null;
    const timed = computed === null ? null : (device.lastForwardDeviceSpan?.() ?? null);
    if (computed !== null && timed !== null) {
      let tokens = 0;
      for (const req of computed) tokens += req.tokens.length;
      const { startMs, elapsedMs, submitMs, enqueueMs } = timed;
      forward = { requests: computed.length, tokens, startMs, elapsedMs, submitMs, enqueueMs };
    }
    return { deviceOpen: this.openCount, forward, copyJobs: tiers.takeCopyJobSpans() };
  }

  async reset(resetCount: number): Promise<void> {
    if (this.faults) await this.die(this.faults.deathAtReset(resetCount), `during reset ${resetCount}`);
    await this.tiers?.drainAndReset();
    this.tables.clear();
  }

  async pendingJobs(): Promise<number> {
    return this.tiers?.pendingCount() ?? 0;
  }

  async state(): Promise<RankState> {
    const connector = this.tiers?.state();
    return {
      tables: this.tables.size,
      inFlightJobs: connector?.inFlightJobs ?? 0,
      deferredStores: connector?.deferredStores ?? 0,
      loadingBlocks: connector?.loadingBlocks ?? 0,
      finishingRequests: connector?.finishingRequests ?? 0,
      deviceJobs: this.device?.pendingJobs() ?? 0,
    };
  }

  async transferLog(): Promise<TransferLogEntry[]> {
    return [...(this.tiers?.transferLog() ?? [])];
  }

  async faultStats(): Promise<RankFaultStats> {
    return this.device ? this.device.faultCounters() : { loadBlocksFailed: 0, storesFailed: 0, jobsDelayed: 0 };
  }

  async shutdown(): Promise<void> {
    if (!this.device) return;
    await this.tiers?.close();
    this.tiers = null;
    await this.device.synchronize();
    this.device.close();
    this.device = null;
  }

  private async die(death: RankDeath | null, when: string): Promise<void> {
    if (death !== null) await this.host.die(death, when);
  }

  private requireDevice(): Device {
    if (!this.device) throw new Error(`rank ${this.rank}: device is not open`);
    return this.device;
  }

  private async applyFaults(step: number): Promise<void> {
    const faults = this.faults!;
    await this.die(faults.deathAt(step), `at step ${step}`);
    const deviceFaults = faults.deviceFaultsAt(step);
    if (deviceFaults) this.requireDevice().setFaults(deviceFaults);
    this.stalling?.atStep(step);
  }

  /** Applies table changes; returns the blocks that entered a table this step. */
  private updateTables(requests: readonly ScheduledRequest[]): number[] {
    const entering: number[] = [];
    for (const req of requests) {
      if (req.blockIds !== null) {
        const table = [...req.blockIds];
        this.tables.set(req.reqId, table);
        for (const id of table) entering.push(id);
      } else {
        const table = this.tables.get(req.reqId);
        if (!table) throw new Error(`rank ${this.rank}: step sends new blocks for unknown request ${req.reqId}`);
        for (const id of req.newBlockIds) {
          table.push(id);
          entering.push(id);
        }
      }
    }
    return entering;
  }

  private forward(device: Device, requests: readonly ScheduledRequest[], after: number[], computeNs: number | undefined): Promise<Uint32Array> {
    const n = requests.length;
    const blockTableOffsets = new Int32Array(n + 1);
    const tokenOffsets = new Int32Array(n + 1);
    const startPositions = new Int32Array(n);
    const sample = new Uint8Array(n);
    let blocks = 0;
    let tokens = 0;
    for (let i = 0; i < n; i++) {
      const req = requests[i];
      blocks += this.tables.get(req.reqId)!.length;
      tokens += req.tokens.length;
      blockTableOffsets[i + 1] = blocks;
      tokenOffsets[i + 1] = tokens;
      startPositions[i] = req.startPosition;
      sample[i] = req.sample ? 1 : 0;
    }
    const blockTables = new Int32Array(blocks);
    const tokenIds = new Int32Array(tokens);
    for (let i = 0; i < n; i++) {
      blockTables.set(this.tables.get(requests[i].reqId)!, blockTableOffsets[i]);
      tokenIds.set(requests[i].tokens, tokenOffsets[i]);
    }
    const batch: ForwardBatch = {
      numRequests: n,
      blockTableOffsets,
      blockTables,
      startPositions,
      tokenOffsets,
      tokens: tokenIds,
      sample,
    };
    return device.forward(batch, computeNs === undefined ? { after } : { after, computeNs });
  }
}
