import type { EvictionPolicyName } from '../../config/eviction-policy-names.js';
import { createOffloadingConnector, type OffloadingSetup } from '../../connector/create-connector.js';
import type { OffloadingConnector } from '../../connector/scheduler-connector.js';
import type { KvGeometry } from '../../core/kv-geometry.js';
import type { FaultPlan } from '../../faults/plan.js';
import type { EngineLogger } from '../../log/engine-events.js';
import type { OffloadingManager } from '../../offload/manager.js';
import type { CpuTierCapacity } from '../../offload/geometry.js';
import type { RemoteRankInit, RemoteTestSwitches } from '../../protocol/remote-jobs.js';
import type { RemoteTierPlan } from '../../remote/create-remote-tier.js';
import type { RemoteTierConnector } from '../../remote/remote-connector.js';
import { RemoteFaults } from '../../remote/remote-faults.js';
import type { RemoteTierSettings } from '../../remote/remote-settings.js';
import type { SchedulerConnector } from '../../scheduler/connector-port.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import type { Closers } from './closers.js';

/** The CPU tier: how large, and its eviction and store policies. */
export interface CpuTierConfig extends CpuTierCapacity {
  readonly eviction: EvictionPolicyName;
  /** 'on-compute' | 'on-evict' | 'reuse:K'. */
  readonly storePolicy: string;
}

/** The remote tier behind the CPU tier, with what it needs besides its settings. */
export interface RemoteTierConfig {
  readonly settings: RemoteTierSettings;
  readonly switches?: RemoteTestSwitches;
  /** Remote fault rules of the plan (remote-fail, remote-down) act on the scheduler side too. */
  readonly faults: FaultPlan;
  readonly logger?: EngineLogger | null;
}

/** Ways a caller changes the stack it gets, to record or to tamper with what a tier sees. */
export interface TierHooks {
  /** Wraps the CPU tier's manager before the connector is built over it. */
  readonly wrapManager?: (manager: OffloadingManager) => OffloadingManager;
  /** Replaces the CPU tier's connector by one over the same manager and store policy (e.g. a recorder). */
  readonly replaceConnector?: (built: OffloadingConnector) => OffloadingConnector;
  /** Wraps what the scheduler talks to (e.g. to alter its metadata in a control run). */
  readonly wrapConnector?: (connector: OffloadingConnector) => SchedulerConnector;
}

/** What every rank builds its side of the tiers from: its CPU shard's size and the remote tier, if any. */
export interface RankTierSetup {
  readonly numCpuBlocks: number;
  readonly remote?: RemoteRankInit;
}

/**
 * The tiers below the GPU, built from one geometry, in the manner of an
 * offloading spec: the scheduler side (one SchedulerConnector: the remote
 * tier composed over the CPU tier's connector, or the CPU tier's alone) and
 * what each rank builds its side from.
 */
export interface TierStack {
  /** The CPU tier's connector, manager and geometry; null without offloading. */
  readonly offloading: OffloadingSetup | null;
  /** The remote tier's scheduler side; null without one. */
  readonly remote: RemoteTierConnector | null;
  /** What the scheduler talks to; null without offloading. */
  readonly connector: SchedulerConnector | null;
  readonly rank: RankTierSetup;
  /** Hands the scheduler's GPU prefix cache to the CPU tier: write-back of groups of GPU blocks reads it. */
  attachScheduler(scheduler: Scheduler): void;
}

const NO_TIERS: TierStack = {
  offloading: null,
  remote: null,
  connector: null,
  rank: { numCpuBlocks: 0 },
  attachScheduler: () => undefined,
};

/**
 * Opens the tiers: the remote server is reached first (an unreachable one
 * stops the assembly before any rank starts), then the stack is built over
 * it. The remote connection is registered with `closers` as soon as it is
 * open.
 */
export async function openTierStack(
  geometry: KvGeometry,
  cpuTier: CpuTierConfig | null,
  remoteTier: RemoteTierConfig | null,
  hooks: TierHooks,
  closers: Closers,
): Promise<TierStack> {
  if (cpuTier === null || remoteTier === null) return buildTierStack(geometry, cpuTier, null, hooks);
  const plan = await (await import('../../remote/create-remote-tier.js')).planRemoteTier(
    remoteTier.settings,
    geometry,
    remoteTier.switches,
    new RemoteFaults(remoteTier.faults.rules, remoteTier.faults.seed, null),
    remoteTier.logger ?? null,
  );
  // Until the remote connector owns the connection, abandoning the plan closes it.
  let stack: TierStack | null = null;
  closers.add(() => (stack?.remote ? stack.remote.close() : plan.abandon()));
  stack = buildTierStack(geometry, cpuTier, plan, hooks);
  return stack;
}

/**
 * Builds the stack over an opened remote tier (or none): the CPU tier with
 * the remote tier observing its manager, then the remote tier composed over
 * the CPU tier's connector.
 */
export function buildTierStack(geometry: KvGeometry, cpuTier: CpuTierConfig | null, plan: RemoteTierPlan | null, hooks: TierHooks): TierStack {
  if (cpuTier === null) return NO_TIERS;
  const wrapManager = composeWrappers(hooks.wrapManager, plan?.wrapManager);
  const built = createOffloadingConnector({ geometry, ...cpuTier, wrapManager });
  const offloading = hooks.replaceConnector ? { ...built, connector: hooks.replaceConnector(built.connector) } : built;
  if (plan && hooks.wrapConnector) throw new TypeError('wrapConnector: the scheduler talks to the remote tier, not to the CPU tier');
  const remote = plan ? plan.attach(offloading) : null;
  const connector = remote ?? (hooks.wrapConnector ? hooks.wrapConnector(offloading.connector) : offloading.connector);
  return {
    offloading,
    remote,
    connector,
    rank: { numCpuBlocks: offloading.geometry.capacityBlocks, ...(plan ? { remote: plan.rankInit } : {}) },
    attachScheduler: (scheduler) => offloading.connector.attachGpuPrefixCache(scheduler.kvCacheManager.pool),
  };
}

/** The caller's wrapper innermost, the remote tier's (which must see every call) outermost. */
function composeWrappers(
  inner: ((m: OffloadingManager) => OffloadingManager) | undefined,
  outer: ((m: OffloadingManager) => OffloadingManager) | undefined,
): ((m: OffloadingManager) => OffloadingManager) | undefined {
  if (!inner) return outer;
  if (!outer) return inner;
  return (m) => outer(inner(m));
}
