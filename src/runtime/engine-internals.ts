import type { OffloadingSetup } from '../connector/create-connector.js';
import type { WorkerConnectorSwitches } from '../connector/worker-connector-switches.js';
import type { RemoteTestSwitches } from '../protocol/remote-jobs.js';
import type { Scheduler, SchedulerTestOnlyOptions } from '../scheduler/scheduler.js';
import type { KVOutputAggregator } from './aggregator.js';
import type { Executor } from './executor.js';

/**
 * The hook between an Engine and kvtier/testing (src/testing/index.ts): the
 * parts an engine is built from, and the switches that turn a reference
 * behaviour off. Neither is reachable through the library API: both live in
 * module-private WeakMaps, and only kvtier/testing reads or fills them.
 */

/** Engine-level switches that turn a recovery behaviour off. */
export interface EngineSwitches {
  /** After a rank-loss reset, keep the aggregator's partial reports of the lost state. */
  readonly keepPartialReportsOnRankLoss?: boolean;
}

/** Every switch that turns a reference behaviour off, by the layer that owns it. */
export interface BehaviourSwitches {
  /** The worker-side connector of every rank. */
  readonly worker?: WorkerConnectorSwitches;
  readonly scheduler?: SchedulerTestOnlyOptions;
  readonly engine?: EngineSwitches;
  /** The remote tier's client and connector. */
  readonly remote?: RemoteTestSwitches;
}

/** What an engine is made of, as its probes read it. */
export interface EngineParts {
  readonly scheduler: Scheduler;
  readonly offloading: OffloadingSetup | null;
  readonly executor: Executor;
  readonly aggregator: KVOutputAggregator;
}

const NO_SWITCHES: BehaviourSwitches = Object.freeze({});
const switchesByOptions = new WeakMap<object, BehaviourSwitches>();
const partsByEngine = new WeakMap<object, EngineParts>();

/** Marks an EngineOptions object: an engine created with it has these behaviours switched off. */
export function setBehaviourSwitches(options: object, switches: BehaviourSwitches): void {
  switchesByOptions.set(options, switches);
}

/** The switches an EngineOptions object was marked with; none for every options object a library user builds. */
export function behaviourSwitchesOf(options: object): BehaviourSwitches {
  return switchesByOptions.get(options) ?? NO_SWITCHES;
}

/** Called once by the Engine constructor. */
export function registerEngineParts(engine: object, parts: EngineParts): void {
  partsByEngine.set(engine, parts);
}

export function enginePartsOf(engine: object): EngineParts {
  const parts = partsByEngine.get(engine);
  if (!parts) throw new TypeError('not an Engine created by Engine.create');
  return parts;
}
