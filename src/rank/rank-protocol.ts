import type { KvGeometry } from '../core/kv-geometry.js';
import type { BackendName, CopyMethod, FaultCounters } from '../device/types.js';
import type { RankFaultHistory } from '../faults/fault-ledger.js';
import type { FaultRule } from '../faults/plan.js';
import type { HostLinkProfile } from '../timing/gpu-profiles.js';
import type { TransferLogEntry } from '../connector/worker-connector.js';
import type { RemoteRankInit } from '../protocol/remote-jobs.js';
import type { WorkerConnectorSwitches } from '../connector/worker-connector-switches.js';
import type { RankStepOutput, SchedulerOutput } from '../protocol/step-protocol.js';

/**
 * What the executor and a RankWorker say to each other (over comlink).
 */

/** A rank's setup, with the fault history its earlier devices left (src/faults/fault-ledger.ts). */
export interface RankInit extends RankFaultHistory {
  readonly rank: number;
  /** The KV cache's shape: the model, tp, block size, offload factor and layout. */
  readonly geometry: KvGeometry;
  readonly backend: BackendName;
  readonly numGpuBlocks: number;
  /** Offloaded blocks of this rank's CPU shard (0 without offloading). */
  readonly numCpuBlocks: number;
  /** Transfer path on the CUDA backend (default auto). */
  readonly copyMethod?: CopyMethod;
  /** Host backend: the GPU host link its transfer jobs are held to (docs/architecture.md, "The step clock"). */
  readonly hostLink?: HostLinkProfile;
  /** This rank's fault rules and the plan's seed. */
  readonly faultRules: readonly FaultRule[];
  readonly faultSeed: number;
  /** Reference behaviours of the worker-side connector switched off (only kvtier/testing sets them). */
  readonly testSwitches?: WorkerConnectorSwitches;
  /** The remote tier this rank moves its shard to and from; absent without one. */
  readonly remote?: RemoteRankInit;
  /** Report each step's forward and copy jobs as the device timed them (RankStepOutput.deviceSpans); off by default. */
  readonly deviceTrace?: boolean;
}

/** What the engine decides about a rank; the executor adds what changes when the rank restarts. */
export type RankSetup = Omit<RankInit, keyof RankFaultHistory>;

export interface RankReady {
  readonly rank: number;
  /** How many devices this rank has opened, this one included (> 1 after a restart). */
  readonly openCount: number;
  readonly backend: BackendName;
  readonly deviceName: string;
  readonly deviceIndex: number;
  readonly bytesPerGpuBlock: number;
  readonly bytesPerCpuBlock: number;
  readonly gpuBytes: number;
  readonly cpuBytes: number;
}

/** Faults a rank's device injected so far: its device's own counters. */
export type RankFaultStats = FaultCounters;

/** What a rank holds between steps (all zero right after a rank-loss reset). */
export interface RankState {
  /** Requests whose block table the rank holds. */
  readonly tables: number;
  /** Jobs submitted and not yet reported. */
  readonly inFlightJobs: number;
  /** Stores waiting for the next step's start. */
  readonly deferredStores: number;
  /** GPU blocks an in-flight load is writing. */
  readonly loadingBlocks: number;
  /** Finished requests whose stores are still running here. */
  readonly finishingRequests: number;
  /** Jobs the rank's device is still running, whether or not the connector still tracks them. */
  readonly deviceJobs: number;
}

export interface RankWorkerApi {
  init(init: RankInit): Promise<RankReady>;
  executeStep(step: SchedulerOutput): Promise<RankStepOutput>;
  /**
   * Waits for every in-flight job and forgets all request and job state
   * (the engine's `resetCount`-th rank-loss reset, 1 being the first).
   */
  reset(resetCount: number): Promise<void>;
  /** Jobs submitted or deferred and not yet reported. */
  pendingJobs(): Promise<number>;
  state(): Promise<RankState>;
  transferLog(): Promise<TransferLogEntry[]>;
  faultStats(): Promise<RankFaultStats>;
  shutdown(): Promise<void>;
}
