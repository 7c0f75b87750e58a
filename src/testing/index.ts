/**
 * kvtier/testing: the engine's internals, for tests only. Switches that turn
 * a reference behaviour off (to show that the behaviour matters), and probes
 * that read what the scheduler and the ranks hold. The library API (the
 * package's main entry) exposes none of it.
 */
export { EngineProbe, probe, type EngineHoldings } from './engine-probe.js';
export { withSwitches } from './switches.js';
export type { BehaviourSwitches, EngineSwitches } from '../runtime/engine-internals.js';
export type { WorkerConnectorSwitches } from '../connector/worker-connector-switches.js';
export type { SchedulerTestOnlyOptions } from '../scheduler/scheduler.js';
export type { TransferLogEntry } from '../connector/worker-connector.js';
export type { RankFaultStats, RankState } from '../rank/rank-protocol.js';
