import type { BlockHash } from '../core/block-hash.js';
import { CpuOffloadingManager, type CpuOffloadingManagerOptions, type EvictionPolicy } from './manager.js';

/**
 * Least recently used: one ordered map, oldest first (a Map iterates in
 * insertion order, so re-inserting a key moves it to the newest end). New
 * blocks and touched blocks become the newest; eviction takes the oldest
 * evictable blocks.
 */
export class LruEvictionPolicy implements EvictionPolicy {
  private readonly order = new Map<BlockHash, true>();

  admitted(key: BlockHash): void {
    // A new block's key is never in the order: evicted and dropped keys leave it.
    this.order.set(key, true);
  }

  touched(key: BlockHash): void {
    if (this.order.delete(key)) this.order.set(key, true);
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const victims: BlockHash[] = [];
    for (const key of this.order.keys()) {
      if (victims.length === count) break;
      if (evictable(key)) victims.push(key);
    }
    return victims.length === count ? victims : null;
  }

  evicted(keys: readonly BlockHash[]): void {
    for (const key of keys) this.order.delete(key);
  }

  dropped(key: BlockHash): void {
    this.order.delete(key);
  }

  reset(): void {
    this.order.clear();
  }

  /** Held keys, least recently used first. */
  keysOldestFirst(): BlockHash[] {
    return [...this.order.keys()];
  }
}

/** An OffloadingManager over the CPU tier that evicts the least recently used block first. */
export class LruOffloadingManager extends CpuOffloadingManager {
  private readonly lru: LruEvictionPolicy;

  constructor(options: CpuOffloadingManagerOptions) {
    const policy = new LruEvictionPolicy();
    super(options, policy);
    this.lru = policy;
  }

  /** Held keys, least recently used first (for diagnostics and tests). */
  keysOldestFirst(): BlockHash[] {
    return this.lru.keysOldestFirst();
  }
}
