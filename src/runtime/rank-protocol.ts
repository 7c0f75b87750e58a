import type { BackendName, KvLayout } from '../device/types.js';
import type { FaultRule } from '../faults/plan.js';
import type { ModelShape } from '../model/shape.js';
import type { RankStepOutput, SchedulerOutput } from '../scheduler/outputs.js';

/**
 * What the executor and a RankWorker say to each other (over comlink).
 */

export interface RankTestSwitches {
  readonly skipPreemptionFlush?: boolean;
  readonly storesIgnoreCompute?: boolean;
  readonly submitStoresImmediately?: boolean;
  readonly recordTransfers?: boolean;
}

export interface RankInit {
  readonly rank: number;
  readonly tp: number;
  readonly backend: BackendName;
  readonly model: ModelShape;
  readonly blockSize: number;
  readonly layout: KvLayout;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks: number;
  readonly offloadFactor: number;
  /** This rank's fault rules and the plan's seed. */
  readonly faultRules: readonly FaultRule[];
  readonly faultSeed: number;
  readonly testSwitches?: RankTestSwitches;
}

export interface RankReady {
  readonly rank: number;
  readonly backend: BackendName;
  readonly deviceName: string;
  readonly deviceIndex: number;
  readonly bytesPerGpuBlock: number;
  readonly bytesPerCpuBlock: number;
  readonly gpuBytes: number;
  readonly cpuBytes: number;
}

export interface RankFaultStats {
  readonly loadBlocksFailed: number;
  readonly storesFailed: number;
  readonly jobsDelayed: number;
}

export interface RankWorkerApi {
  init(init: RankInit): Promise<RankReady>;
  executeStep(step: SchedulerOutput): Promise<RankStepOutput>;
  /** Waits for every in-flight job and forgets all request and job state. */
  reset(): Promise<void>;
  /** Jobs submitted or deferred and not yet reported. */
  pendingJobs(): Promise<number>;
  transferLog(): Promise<unknown[]>;
  faultStats(): Promise<RankFaultStats>;
  shutdown(): Promise<void>;
}
