import type { BlockHash } from '../core/block-hash.js';
import { ConfigError } from '../core/errors.js';
import { ForwardingManager } from './forwarding-manager.js';
import type { OffloadingManager, PrepareStoreOutput, StoreAdmission } from './manager.js';

export interface ReuseFilterOptions {
  /** A block is stored only once lookups have seen its key at least this many times (>= 1). */
  readonly threshold: number;
  /** Keys whose sightings are remembered; the least recently seen key is forgotten beyond this (>= 1). */
  readonly maxTrackerSize: number;
}

/**
 * Stores only blocks that came back: every key a lookup sees is counted in a
 * bounded, least-recently-seen-first tracker, and `prepareStore` stores a key
 * only once it was counted `threshold` times. Keys below the threshold are
 * not stored (they come back in `declinedKeys`) but are still protected from
 * eviction like every other input key. A key pushed out of the tracker starts
 * again from zero. Everything else is the wrapped manager's.
 *
 * The tracker outlives `reset`: it records how requests reuse prefixes, which
 * losing the tier's contents does not change.
 */
export class ReuseFilterManager extends ForwardingManager {
  /** Sightings per key, least recently seen first. */
  private readonly sightings = new Map<BlockHash, number>();
  readonly threshold: number;
  readonly maxTrackerSize: number;

  constructor(backing: OffloadingManager, options: ReuseFilterOptions) {
    super(backing);
    if (!Number.isSafeInteger(options.threshold) || options.threshold < 1) {
      throw new ConfigError(`reuse filter: threshold must be an integer >= 1, got ${String(options.threshold)}`);
    }
    if (!Number.isSafeInteger(options.maxTrackerSize) || options.maxTrackerSize < 1) {
      throw new ConfigError(
        `reuse filter: maxTrackerSize must be an integer >= 1, got ${String(options.maxTrackerSize)}`,
      );
    }
    this.threshold = options.threshold;
    this.maxTrackerSize = options.maxTrackerSize;
  }

  override lookup(keys: readonly BlockHash[]): number | null {
    for (const key of keys) this.countSighting(key);
    return this.inner.lookup(keys);
  }

  override prepareStore(keys: readonly BlockHash[], admit?: StoreAdmission): PrepareStoreOutput | null {
    const reused: StoreAdmission = (key) => this.sightingsOf(key) >= this.threshold;
    return this.inner.prepareStore(keys, admit === undefined ? reused : (key) => reused(key) && admit(key));
  }

  /** How many times lookups have seen `key` since it entered the tracker (0 if untracked). */
  sightingsOf(key: BlockHash): number {
    return this.sightings.get(key) ?? 0;
  }

  private countSighting(key: BlockHash): void {
    const count = this.sightingsOf(key) + 1;
    this.sightings.delete(key);
    this.sightings.set(key, count);
    if (this.sightings.size > this.maxTrackerSize) {
      const oldest = this.sightings.keys().next().value as BlockHash;
      this.sightings.delete(oldest);
    }
  }
}
