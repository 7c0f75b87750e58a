import type { SchedulerStats } from '../scheduler/scheduler-stats.js';
import type { EngineMetrics } from './engine-types.js';

/**
 * The public hit and reread counters from the scheduler's: the one place where
 * the internal `cpuTierHitTokens` / `cpuTierRereadTokens` become the public
 * `hits.cpuTierTokens` / `rereads.cpuTierTokens`.
 */
export function cacheTierMetrics(s: SchedulerStats): Pick<EngineMetrics, 'hits' | 'rereads'> {
  return {
    hits: { gpuPrefixTokens: s.gpuPrefixHitTokens, cpuTierTokens: s.cpuTierHitTokens },
    rereads: { gpuPrefixTokens: s.gpuPrefixRereadTokens, cpuTierTokens: s.cpuTierRereadTokens },
  };
}
