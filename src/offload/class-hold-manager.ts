import type { CpuOffloadingManagerOptions } from './cpu-offloading-manager.js';
import { HoldOffloadingManager } from './hold-manager.js';

/**
 * Class hold: the hold policy (hold-manager.ts) that ranks the blocks it may
 * evict by what blocks of their kind turned out to be worth.
 *
 * Hold keeps a share of the stored blocks for as long as reuse takes, and
 * picks that share by arrival: the blocks it happens to have when the tier
 * fills. Yet whether a prompt is continued depends on the request it came
 * from: a turn that continues a conversation is continued again more often
 * (and sooner) than a first turn, and long prompts more often than short
 * ones. Nothing is told in advance, but the tier sees which kinds come back,
 * so it learns a worth per class of request (class-ranking.ts: continuation
 * or not, length in powers of two) and uses it twice:
 * - eviction from probation takes, among the blocks held long enough, the
 *   one least likely to be reused given its class and its age (older blocks
 *   not reused yet are less likely to be), instead of the oldest;
 * - a store hold would pass by takes room from the newest probation blocks
 *   of the least worthy class when that class is worth clearly less than the
 *   tier's average block and the store is of another class.
 * Everything else is hold's: reused blocks kept first, the hold time learned
 * from reuse distances, chains evicted from their tail.
 */
export function classHoldManager(options: CpuOffloadingManagerOptions): HoldOffloadingManager {
  return new HoldOffloadingManager(options, true);
}
