import type { BlockHash } from '../core/block-hash.js';
import type { TransferLogEntry } from '../connector/worker-connector.js';
import type { OffloadingManagerStats } from '../offload/manager.js';
import type { RankFaultStats, RankState } from '../rank/rank-protocol.js';
import type { Engine } from '../runtime/engine.js';
import { enginePartsOf, type EngineParts } from '../runtime/engine-internals.js';
import type { KVCacheUsage } from '../scheduler/kv-cache-manager.js';

/** What the scheduler side holds at a moment (after a rank-loss reset everything is empty). */
export interface EngineHoldings {
  /** The GPU block pool: free, cached (prefix cache), referenced, pending (being loaded). */
  readonly gpu: KVCacheUsage;
  /** The CPU tier as the offloading manager sees it; null without offloading. */
  readonly cpuTier: OffloadingManagerStats | null;
  /** Transfer jobs some but not all ranks reported finished. */
  readonly partialJobs: number;
}

/**
 * Reads what a live engine and its ranks hold, for tests that check that
 * nothing leaked, that a reset forgot everything, or in which order the
 * ranks submitted their transfers.
 */
export class EngineProbe {
  private readonly parts: EngineParts;

  constructor(engine: Engine) {
    this.parts = enginePartsOf(engine);
  }

  /** What the scheduler side holds now. */
  holdings(): EngineHoldings {
    return {
      gpu: this.parts.scheduler.kvCacheManager.usage(),
      cpuTier: this.parts.offloading?.manager.stats() ?? null,
      partialJobs: this.parts.aggregator.pendingJobIds().length,
    };
  }

  /**
   * The blocks each tier holds now, by hash: the GPU prefix cache's hashed
   * blocks and the CPU tier's ready keys (null without offloading). What KV
   * events describe, so a subscriber's view can be checked against it.
   */
  cachedBlocks(): { readonly gpu: BlockHash[]; readonly cpu: BlockHash[] | null } {
    const manager = this.parts.offloading?.manager;
    return {
      gpu: this.parts.scheduler.kvCacheManager.pool.cachedHashes(),
      cpu: manager === undefined ? null : (manager.readyKeys?.() ?? []),
    };
  }

  /** What each rank holds between steps (tables, jobs); all zero right after a rank-loss reset. */
  rankStates(): Promise<RankState[]> {
    return this.parts.executor.rankStates();
  }

  /** Jobs each rank still has in flight or deferred (0 everywhere once idle). */
  pendingJobsPerRank(): Promise<number[]> {
    return this.parts.executor.pendingJobs();
  }

  /** Each rank's transfer submissions, in order (recorded only under the `recordTransfers` switch). */
  transferLogs(): Promise<TransferLogEntry[][]> {
    return this.parts.executor.transferLogs();
  }

  /**
   * Ends a rank's thread between steps, at a moment the test chose by what it
   * observed rather than by a step number fixed up front; the next step finds
   * the rank dead, as after a crash.
   */
  killRank(rank: number): Promise<void> {
    return this.parts.executor.killRank(rank);
  }

  /** Faults each rank's device injected so far. */
  faultStats(): Promise<RankFaultStats[]> {
    return this.parts.executor.faultStats();
  }
}

/** The probe of a live engine. */
export function probe(engine: Engine): EngineProbe {
  return new EngineProbe(engine);
}
