import type { OffloadingManagerStats } from '../offload/manager.js';
import type { SchedulerStats } from '../scheduler/scheduler-stats.js';
import type { TransferDirection } from '../protocol/step-protocol.js';
import type { EngineMonitor } from './engine-monitor.js';

/** What the engine holds right now, read at scrape time. */
export interface EngineGauges {
  readonly requests: { readonly running: number; readonly waiting: number; readonly waitingForLoad: number };
  readonly gpuBlocks: {
    readonly capacity: number;
    /** Held by at least one request. */
    readonly used: number;
    /** Allocatable: free, or cached with no request holding them (evictable). */
    readonly free: number;
    /** In the prefix cache, held or not. */
    readonly prefixCached: number;
    /** Cached blocks evicted so their slot could be reused, over the engine's lifetime. */
    readonly evictedTotal: number;
  };
  /** null without a CPU tier. */
  readonly cpuBlocks: {
    readonly capacity: number;
    /** Loadable, pinned ones included. */
    readonly ready: number;
    readonly beingStored: number;
    /** Ready blocks pinned by in-flight loads. */
    readonly pinned: number;
    readonly free: number;
    readonly evictedTotal: number;
    /** Blocks the store policy declined to store, over the engine's lifetime. */
    readonly declinedTotal: number;
  } | null;
  readonly jobsInFlight: Readonly<Record<TransferDirection, number>>;
  /** One entry per rank: whether its thread is alive. */
  readonly ranksAlive: readonly boolean[];
}

/** The parts an engine (or a bench standing in for one) reads its gauges from. */
export interface GaugeSources {
  readonly scheduler: SchedulerStats;
  readonly gpuEvictedBlocks: number;
  readonly cpuTier: OffloadingManagerStats | null;
  readonly monitor: EngineMonitor;
  readonly ranksAlive: readonly boolean[];
}

export function readGauges(sources: GaugeSources): EngineGauges {
  const { scheduler: s, cpuTier: tier } = sources;
  return {
    requests: { running: s.running, waiting: s.waiting, waitingForLoad: s.waitingForCpuTierLoad },
    gpuBlocks: {
      capacity: s.kvCache.total,
      used: s.kvCache.referenced,
      free: s.kvCache.free,
      prefixCached: s.kvCache.cached,
      evictedTotal: sources.gpuEvictedBlocks,
    },
    cpuBlocks:
      tier === null
        ? null
        : {
            capacity: tier.capacityBlocks,
            ready: tier.readyBlocks,
            beingStored: tier.beingStoredBlocks,
            pinned: tier.pinnedBlocks,
            free: tier.capacityBlocks - tier.usedBlocks,
            evictedTotal: tier.evictions,
            declinedTotal: tier.storesDeclined,
          },
    jobsInFlight: { ...sources.monitor.jobsInFlight },
    ranksAlive: sources.ranksAlive,
  };
}

/** Histograms and gauges for a Prometheus registry, besides the counters of EngineMetrics. */
export interface MonitoringSnapshot {
  readonly monitor: EngineMonitor;
  readonly gauges: EngineGauges;
}
