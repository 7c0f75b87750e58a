import type { KvGeometry } from '../../core/kv-geometry.js';
import { validateFaultPlanBlocks, validateFaultPlanRanks, type FaultPlan } from '../../faults/plan.js';
import { EngineEventLog, type EngineLogger } from '../../log/engine-events.js';
import { EngineMonitor } from '../../metrics/engine-monitor.js';
import type { RankSetup } from '../../rank/rank-protocol.js';
import type { RemoteTierSettings } from '../../remote/remote-settings.js';
import type { SchedulerConfig } from '../../scheduler/config.js';
import { Scheduler, type SchedulerOptions } from '../../scheduler/scheduler.js';
import { KVOutputAggregator } from '../aggregator.js';
import type { BehaviourSwitches } from '../engine-internals.js';
import { TransferMetrics } from '../../metrics/transfer-metrics.js';
import { eventLogObserver, monitorObserver, StepObservers, transferTotalsObserver, type StepObserver } from '../step-observer.js';
import { Closers } from './closers.js';
import { rankSetups, type RankDeviceConfig } from './rank-setups.js';
import { buildTierStack, openTierStack, type CpuTierConfig, type RankTierSetup, type TierHooks, type TierStack } from './tier-stack.js';
import type { SchedulerConnector } from '../../scheduler/connector-port.js';

/** Everything an engine is built from besides its geometry, resolved. */
export interface AssemblyConfig {
  readonly scheduler: SchedulerConfig;
  /** The CPU tier; null: no offloading. */
  readonly cpuTier: CpuTierConfig | null;
  /** The remote tier behind the CPU tier; null: none (ignored without a CPU tier). */
  readonly remote: RemoteTierSettings | null;
  /** Fault rules for the ranks and the remote tier; none by default. */
  readonly faults?: FaultPlan;
  readonly device: RankDeviceConfig;
}

/** How the caller runs the assembled parts: clocks, switches, logging, hooks. */
export interface AssemblyOptions<R> {
  /** Reference behaviours switched off (kvtier/testing only). */
  readonly switches?: BehaviourSwitches;
  readonly logger?: EngineLogger | null;
  /** Steps slower than this (ms) are logged; default: none are. */
  readonly slowStepMs?: number | null;
  /** The scheduler's options; by default it is observed by the assembly's monitor. */
  readonly scheduler?: Omit<SchedulerOptions, 'connector'>;
  readonly hooks?: TierHooks;
  /**
   * A tier of the caller's own instead of the CPU tier (cpuTier must be null):
   * each rank's CPU shard holds `numCpuBlocks`, and the scheduler talks to
   * the connector built over the started ranks.
   */
  readonly customTier?: { readonly numCpuBlocks: number; connector(ranks: R): SchedulerConnector };
}

/** Starts the ranks from their setups (their outputs merged by `aggregator`), and stops them. */
export interface RankStarter<R> {
  start(setups: readonly RankSetup[], aggregator: KVOutputAggregator): Promise<R>;
  /** Stops ranks whose engine did not get built after all. */
  stop(ranks: R): Promise<void>;
}

/** The same, for ranks that run in the calling thread and start at once. */
export interface LocalRankStarter<R> {
  start(setups: readonly RankSetup[], aggregator: KVOutputAggregator): R;
}

/** An engine's parts, built from one config and one geometry. */
export interface EngineAssembly<R> {
  readonly geometry: KvGeometry;
  readonly tiers: TierStack;
  /** What the scheduler talks to: the tier stack's connector, or the custom tier's. */
  readonly connector: SchedulerConnector | null;
  readonly scheduler: Scheduler;
  readonly rankSetups: readonly RankSetup[];
  readonly aggregator: KVOutputAggregator;
  readonly ranks: R;
  readonly monitor: EngineMonitor;
  readonly transfers: TransferMetrics;
  readonly events: EngineEventLog;
  /** Where one step is reported: fanned out to the transfer totals, the monitor and the event log. */
  readonly observer: StepObserver;
  /** Closes what the assembly opened besides the ranks (the remote tier's connection). */
  close(): Promise<void>;
}

const NO_FAULTS: FaultPlan = { rules: [], seed: 0 };

/**
 * The one place an engine is put together, for the threaded engine, the
 * simulated one, the benches and the test harnesses alike, in this order:
 * the tier stack (scheduler side and rank side; the remote server is reached
 * first, so an unreachable one stops the engine before any rank starts), one
 * setup per rank, the ranks (started by the caller), the scheduler over the
 * tiers with its GPU prefix cache handed to the CPU tier, and the step
 * observers. When a step fails, whatever the earlier steps opened is closed
 * before the error propagates.
 */
export async function assembleEngine<R>(
  geometry: KvGeometry,
  config: AssemblyConfig,
  options: AssemblyOptions<R>,
  ranks: RankStarter<R>,
): Promise<EngineAssembly<R>> {
  const faults = checkedFaults(geometry, config, options);
  const switches = options.switches ?? {};
  const closers = new Closers();
  return closers.orClose(async () => {
    const remote = config.remote ? { settings: config.remote, switches: switches.remote, faults, logger: options.logger } : null;
    const tiers = await openTierStack(geometry, config.cpuTier, remote, options.hooks ?? {}, closers);
    const setups = rankSetups(geometry, config.scheduler.numGpuBlocks, config.device, rankTiers(tiers, options), faults, switches.worker);
    const aggregator = new KVOutputAggregator(geometry.tp, geometry.model.vocabSize);
    const started = await ranks.start(setups, aggregator);
    try {
      return completeAssembly(geometry, config, options, faults, { tiers, setups, aggregator, ranks: started }, closers);
    } catch (error) {
      await ranks.stop(started);
      throw error;
    }
  });
}

/**
 * assembleEngine for ranks in the calling thread and tiers that open no
 * connection (no remote tier): nothing to wait for, so it builds at once.
 */
export function assembleLocalEngine<R>(
  geometry: KvGeometry,
  config: AssemblyConfig,
  options: AssemblyOptions<R>,
  ranks: LocalRankStarter<R>,
): EngineAssembly<R> {
  if (config.remote !== null && config.cpuTier !== null) {
    throw new TypeError('assembleLocalEngine: a remote tier opens a connection; assemble it with assembleEngine');
  }
  const faults = checkedFaults(geometry, config, options);
  const tiers = buildTierStack(geometry, config.cpuTier, null, options.hooks ?? {});
  const setups = rankSetups(geometry, config.scheduler.numGpuBlocks, config.device, rankTiers(tiers, options), faults, options.switches?.worker);
  const aggregator = new KVOutputAggregator(geometry.tp, geometry.model.vocabSize);
  const started = ranks.start(setups, aggregator);
  return completeAssembly(geometry, config, options, faults, { tiers, setups, aggregator, ranks: started }, new Closers());
}

function checkedFaults<R>(geometry: KvGeometry, config: AssemblyConfig, options: AssemblyOptions<R>): FaultPlan {
  if (options.customTier && config.cpuTier !== null) throw new TypeError('customTier: the CPU tier must be off (cpuTier null)');
  const faults = config.faults ?? NO_FAULTS;
  validateFaultPlanRanks(faults, geometry.tp);
  validateFaultPlanBlocks(faults, config.scheduler.numGpuBlocks);
  return faults;
}

function rankTiers<R>(tiers: TierStack, options: AssemblyOptions<R>): RankTierSetup {
  return options.customTier ? { numCpuBlocks: options.customTier.numCpuBlocks } : tiers.rank;
}

interface StartedParts<R> {
  readonly tiers: TierStack;
  readonly setups: readonly RankSetup[];
  readonly aggregator: KVOutputAggregator;
  readonly ranks: R;
}

/** The scheduler over the tiers, the GPU prefix cache handed to the CPU tier, the monitor and the step observers. */
function completeAssembly<R>(
  geometry: KvGeometry,
  config: AssemblyConfig,
  options: AssemblyOptions<R>,
  faults: FaultPlan,
  started: StartedParts<R>,
  closers: Closers,
): EngineAssembly<R> {
  const { tiers, ranks } = started;
  const connector = options.customTier ? options.customTier.connector(ranks) : tiers.connector;
  const monitor = new EngineMonitor(geometry.tp);
  const scheduler = new Scheduler(config.scheduler, {
    testOnly: options.switches?.scheduler,
    observer: monitor,
    ...options.scheduler,
    connector,
  });
  tiers.attachScheduler(scheduler);
  const transfers = new TransferMetrics();
  const events = new EngineEventLog(options.logger ?? null, faults.rules.length > 0 ? faults : null, { slowStepMs: options.slowStepMs });
  return {
    geometry,
    tiers,
    connector,
    scheduler,
    rankSetups: started.setups,
    aggregator: started.aggregator,
    ranks,
    monitor,
    transfers,
    events,
    observer: new StepObservers([transferTotalsObserver(transfers), monitorObserver(monitor), eventLogObserver(events)]),
    close: async () => {
      const failures = await closers.closeAll();
      if (failures.length > 0) throw failures[0];
    },
  };
}
