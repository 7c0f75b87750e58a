import type { BlockHash } from '../core/block-hash.js';
import { BlockHashIndex } from '../core/block-hash-index.js';
import { ABSENT } from '../core/lane-hash-table.js';
import { CpuOffloadingManager, type CpuOffloadingManagerOptions, type EvictionPolicy } from './manager.js';

const NONE = -1;

/**
 * Least recently used: one list, oldest first. New blocks and touched blocks
 * become the newest; eviction takes the oldest evictable blocks.
 *
 * The list is intrusive and in typed arrays (node -> previous / next node),
 * with keys found through a BlockHashIndex, so a tier of hundreds of
 * thousands of blocks costs no map entry or object per block; the only
 * per-block reference is the key string, kept to hand victims back.
 */
export class LruEvictionPolicy implements EvictionPolicy {
  private prev = new Int32Array(16);
  private next = new Int32Array(16);
  /** Key per node; undefined for a free node. */
  private readonly keys: (BlockHash | undefined)[] = [];
  /** Free nodes (their `next` links the free list). */
  private freeHead = NONE;
  private oldest = NONE;
  private newest = NONE;
  private readonly index = new BlockHashIndex((node) => this.keys[node]);

  admitted(key: BlockHash): void {
    // A new block's key is never in the order: evicted and dropped keys leave it.
    const node = this.takeNode(key);
    this.index.add(key, node);
    this.linkNewest(node);
  }

  touched(key: BlockHash): void {
    const node = this.index.get(key);
    if (node === ABSENT || node === this.newest) return;
    this.unlink(node);
    this.linkNewest(node);
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const victims: BlockHash[] = [];
    for (let node = this.oldest; node !== NONE && victims.length < count; node = this.next[node]) {
      const key = this.keys[node] as BlockHash;
      if (evictable(key)) victims.push(key);
    }
    return victims.length === count ? victims : null;
  }

  evicted(keys: readonly BlockHash[]): void {
    for (const key of keys) this.remove(key);
  }

  dropped(key: BlockHash): void {
    this.remove(key);
  }

  reset(): void {
    this.index.clear();
    this.keys.length = 0;
    this.freeHead = NONE;
    this.oldest = NONE;
    this.newest = NONE;
  }

  /** Held keys, least recently used first. */
  keysOldestFirst(): BlockHash[] {
    const out: BlockHash[] = [];
    for (let node = this.oldest; node !== NONE; node = this.next[node]) out.push(this.keys[node] as BlockHash);
    return out;
  }

  private remove(key: BlockHash): void {
    const node = this.index.get(key);
    if (node === ABSENT) return;
    this.index.delete(key);
    this.unlink(node);
    this.keys[node] = undefined;
    this.next[node] = this.freeHead;
    this.freeHead = node;
  }

  private takeNode(key: BlockHash): number {
    let node = this.freeHead;
    if (node !== NONE) {
      this.freeHead = this.next[node];
      this.keys[node] = key;
      return node;
    }
    node = this.keys.length;
    this.keys.push(key);
    if (node >= this.prev.length) {
      const prev = new Int32Array(this.prev.length * 2);
      const next = new Int32Array(this.next.length * 2);
      prev.set(this.prev);
      next.set(this.next);
      this.prev = prev;
      this.next = next;
    }
    return node;
  }

  private linkNewest(node: number): void {
    this.prev[node] = this.newest;
    this.next[node] = NONE;
    if (this.newest === NONE) this.oldest = node;
    else this.next[this.newest] = node;
    this.newest = node;
  }

  private unlink(node: number): void {
    const prev = this.prev[node];
    const next = this.next[node];
    if (prev === NONE) this.oldest = next;
    else this.next[prev] = next;
    if (next === NONE) this.newest = prev;
    else this.prev[next] = prev;
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
