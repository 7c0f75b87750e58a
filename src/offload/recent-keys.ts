import type { BlockHash } from '../core/block-hash.js';

/**
 * A set of keys bounded by count: adding one beyond `capacity` forgets the
 * one added longest ago. Adding a remembered key makes it the newest again.
 */
export class RecentKeys {
  private readonly keys = new Set<BlockHash>();

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`capacity must be an integer >= 1, got ${String(capacity)}`);
    }
  }

  get size(): number {
    return this.keys.size;
  }

  has(key: BlockHash): boolean {
    return this.keys.has(key);
  }

  add(key: BlockHash): void {
    if (this.keys.delete(key)) {
      this.keys.add(key);
      return;
    }
    if (this.keys.size === this.capacity) this.keys.delete(this.keys.values().next().value as BlockHash);
    this.keys.add(key);
  }

  /** Forgets `key`; false when it was not remembered. */
  delete(key: BlockHash): boolean {
    return this.keys.delete(key);
  }
}
