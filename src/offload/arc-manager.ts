import type { BlockHash } from '../core/block-hash.js';
import { CpuOffloadingManager, type CpuOffloadingManagerOptions } from './cpu-offloading-manager.js';
import type { EvictionPolicy } from './manager.js';

/** ARC's lists, each oldest first, and its adaptive target for T1. */
export interface ArcState {
  /** Target size of T1; eviction prefers T1 while |T1| >= floor(targetT1Size). */
  readonly targetT1Size: number;
  /** Held blocks seen once. */
  readonly t1: readonly BlockHash[];
  /** Held blocks seen again since they were stored. */
  readonly t2: readonly BlockHash[];
  /** Ghosts: keys recently evicted from T1 (no data held). */
  readonly b1: readonly BlockHash[];
  /** Ghosts: keys recently evicted from T2. */
  readonly b2: readonly BlockHash[];
}

/**
 * Adaptive Replacement Cache. Blocks enter T1; a touch of a ready T1 block
 * promotes it to T2, so blocks reused across requests outlive a scan of
 * one-time blocks. Evicted keys are remembered in ghost lists B1 / B2 (each at
 * most `capacity` keys); a touch that hits a ghost means the list it was
 * evicted from was too small, so the target size p of T1 moves towards it:
 * a B1 hit raises p, a B2 hit lowers it. Eviction takes T1's oldest evictable
 * block while |T1| >= floor(p), otherwise T2's; when the preferred list has
 * no evictable block it falls back to the other one, so a store is refused
 * only when no block at all is evictable.
 *
 * A refreshed chain (a request stored more of it) becomes the newest of the
 * list each block is in, its first block the most recent, without moving any
 * block to T2: its own request extending it is not a reuse.
 */
export class ArcEvictionPolicy implements EvictionPolicy {
  private readonly t1 = new Map<BlockHash, true>();
  private readonly t2 = new Map<BlockHash, true>();
  private readonly b1 = new Map<BlockHash, true>();
  private readonly b2 = new Map<BlockHash, true>();
  private targetT1Size = 0;

  constructor(private readonly capacity: number) {}

  admitted(key: BlockHash): void {
    this.b1.delete(key);
    this.b2.delete(key);
    this.t1.set(key, true);
  }

  touched(key: BlockHash, ready: boolean | null): void {
    if (this.t1.delete(key)) {
      // A block still being stored has not been reused yet: it only refreshes its place in T1.
      (ready === true ? this.t2 : this.t1).set(key, true);
    } else if (this.t2.delete(key)) {
      this.t2.set(key, true);
    } else if (this.b1.has(key)) {
      const step = Math.max(1, this.b2.size / this.b1.size);
      this.targetT1Size = Math.min(this.targetT1Size + step, this.capacity);
    } else if (this.b2.has(key)) {
      const step = Math.max(1, this.b1.size / this.b2.size);
      this.targetT1Size = Math.max(this.targetT1Size - step, 0);
    }
  }

  readonly refreshReadsWholeChain = true;

  refreshedChain(keys: readonly BlockHash[], _ids: ArrayLike<number>, from: number, to: number): void {
    for (let i = to - 1; i >= from; i--) {
      const key = keys[i];
      if (this.t1.delete(key)) this.t1.set(key, true);
      else if (this.t2.delete(key)) this.t2.set(key, true);
    }
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const t1Candidates = evictableKeys(this.t1, evictable);
    const t2Candidates = evictableKeys(this.t2, evictable);
    const target = Math.floor(this.targetT1Size);
    let t1Size = this.t1.size;
    const victims: BlockHash[] = [];
    while (victims.length < count) {
      const preferT1 = t1Size >= target;
      const [first, second] = preferT1 ? [t1Candidates, t2Candidates] : [t2Candidates, t1Candidates];
      let next = first.next();
      let fromT1 = preferT1;
      if (next.done === true) {
        next = second.next();
        fromT1 = !preferT1;
      }
      if (next.done === true) return null;
      victims.push(next.value);
      if (fromT1) t1Size--;
    }
    return victims;
  }

  evicted(keys: readonly BlockHash[]): void {
    for (const key of keys) {
      if (this.t1.delete(key)) remember(this.b1, key, this.capacity);
      else if (this.t2.delete(key)) remember(this.b2, key, this.capacity);
    }
  }

  dropped(key: BlockHash): void {
    this.t1.delete(key);
    this.t2.delete(key);
  }

  reset(): void {
    this.t1.clear();
    this.t2.clear();
    this.b1.clear();
    this.b2.clear();
    this.targetT1Size = 0;
  }

  state(): ArcState {
    return {
      targetT1Size: this.targetT1Size,
      t1: [...this.t1.keys()],
      t2: [...this.t2.keys()],
      b1: [...this.b1.keys()],
      b2: [...this.b2.keys()],
    };
  }
}

/** The keys of `list`, oldest first, that `evictable` accepts. */
function* evictableKeys(list: Map<BlockHash, true>, evictable: (key: BlockHash) => boolean): Generator<BlockHash> {
  for (const key of list.keys()) {
    if (evictable(key)) yield key;
  }
}

/** Adds `key` as the newest ghost and drops the oldest ones beyond `capacity`. */
function remember(ghosts: Map<BlockHash, true>, key: BlockHash, capacity: number): void {
  ghosts.set(key, true);
  for (const oldest of ghosts.keys()) {
    if (ghosts.size <= capacity) break;
    ghosts.delete(oldest);
  }
}

/** A manager of the CPU tier with ARC eviction. */
export function arcManager(options: CpuOffloadingManagerOptions): CpuOffloadingManager<ArcEvictionPolicy> {
  return new CpuOffloadingManager(options, new ArcEvictionPolicy(options.capacityBlocks));
}
