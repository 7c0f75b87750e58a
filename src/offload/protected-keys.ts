import type { BlockHash } from '../core/block-hash.js';

/**
 * CPU-tier keys that queued requests will look up when they are admitted,
 * by request. The scheduler knows a waiting request's block hashes long
 * before it runs, and runs the queue in order: a block a queued request will
 * read is needed sooner than any block nobody queued asked for (whoever asks
 * for that one later queues behind), and among queued requests the one
 * nearer the head needs its blocks first. A key is protected while any
 * request protecting it waits; its rank is that of the nearest such request.
 */
export class ProtectedKeys {
  private readonly byOwner = new Map<string, { readonly rank: number; readonly keys: readonly BlockHash[] }>();
  /** Ranks of the owners protecting each key (usually one). */
  private readonly ranks = new Map<BlockHash, number[]>();
  private lastRank = 0;
  private firstRank = 0;

  /** `changed(key, isProtected)` hears each key that becomes protected or stops being protected. */
  constructor(private readonly changed: (key: BlockHash, isProtected: boolean) => void = () => {}) {}

  /**
   * `owner` will look up `keys` (replacing what it protected before): it
   * joined the back of the queue, or with `front` its head (a preempted
   * request resumes first).
   */
  protect(owner: string, keys: readonly BlockHash[], front = false): void {
    this.release(owner);
    if (keys.length === 0) return;
    const rank = front ? --this.firstRank : ++this.lastRank;
    this.byOwner.set(owner, { rank, keys });
    for (const key of keys) {
      const ranks = this.ranks.get(key);
      if (ranks !== undefined) {
        ranks.push(rank);
        continue;
      }
      this.ranks.set(key, [rank]);
      this.changed(key, true);
    }
  }

  /** `owner` was admitted or left: its keys are protected only by other owners now. */
  release(owner: string): void {
    const entry = this.byOwner.get(owner);
    if (entry === undefined) return;
    this.byOwner.delete(owner);
    for (const key of entry.keys) {
      const ranks = this.ranks.get(key) as number[];
      if (ranks.length === 1) {
        this.ranks.delete(key);
        this.changed(key, false);
        continue;
      }
      const at = ranks.indexOf(entry.rank);
      if (at >= 0) ranks.splice(at, 1);
    }
  }

  has(key: BlockHash): boolean {
    // Most of the time nothing is queued: skip hashing the key.
    return this.ranks.size !== 0 && this.ranks.has(key);
  }

  /** Queue rank of the nearest request protecting `key` (lower is sooner), or Infinity when none does. */
  rankOf(key: BlockHash): number {
    const ranks = this.ranks.get(key);
    if (ranks === undefined) return Infinity;
    let min = ranks[0];
    for (let i = 1; i < ranks.length; i++) if (ranks[i] < min) min = ranks[i];
    return min;
  }

  /** Distinct protected keys. */
  get size(): number {
    return this.ranks.size;
  }

  clear(): void {
    const keys = [...this.ranks.keys()];
    this.byOwner.clear();
    this.ranks.clear();
    for (const key of keys) this.changed(key, false);
  }
}
