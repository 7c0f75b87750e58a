import type { BlockHash } from '../core/block-hash.js';
import { CpuOffloadingManager, type CpuOffloadingManagerOptions, type EvictionPolicy } from './manager.js';
import { ArraySet, PrefixLinks, type ChosenKeys } from './prefix-links.js';

/**
 * S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
 * SOSP 2023) over the prefix tree of the tier.
 *
 * New blocks enter a small FIFO (a tenth of the tier); a block reused while
 * there moves to the main FIFO, and one that leaves the small FIFO unused is
 * evicted and remembered as a ghost. A block stored again while its ghost is
 * remembered goes straight to the main FIFO. The main FIFO gives blocks
 * reused since they were last passed over a second chance (up to three):
 * eviction passes over them, lowering their count and moving them to the
 * back. One-time prompts thus leave after a short stay while prefixes reused
 * across requests stay.
 *
 * Ghosts are kept for several capacities of keys (they hold no data), since a
 * prompt's next use often comes after far more than a tier's worth of other
 * blocks. Every victim is the deepest held block under the block the queues
 * chose, so descendants leave before their ancestors, and blocks whose
 * parent left go first.
 */

/** The small FIFO's share of the tier. */
const SMALL_SHARE = 0.1;
/** Ghost keys remembered, in tier capacities. */
const GHOST_CAPACITIES = 4;
/** Largest reuse count (second chances in the main FIFO). */
const MAX_FREQ = 3;

export interface S3FifoState {
  /** Small FIFO, oldest first. */
  readonly small: readonly BlockHash[];
  /** Main FIFO, oldest first. */
  readonly main: readonly BlockHash[];
  /** Ghost keys, oldest first. */
  readonly ghosts: readonly BlockHash[];
}

export class S3FifoEvictionPolicy implements EvictionPolicy {
  private readonly small = new Map<BlockHash, true>();
  /** Main FIFO with each block's reuse count. */
  private readonly main = new Map<BlockHash, number>();
  private readonly ghosts = new Map<BlockHash, true>();
  private readonly links: PrefixLinks;
  private readonly smallTarget: number;
  private readonly ghostCapacity: number;
  /** Main blocks the last choice passed over (second chances to apply when it is carried out). */
  private passedOver: BlockHash[] = [];

  constructor(capacity: number) {
    this.smallTarget = Math.max(1, Math.floor(capacity * SMALL_SHARE));
    this.ghostCapacity = Math.max(1, GHOST_CAPACITIES * capacity);
    this.links = new PrefixLinks(Math.max(65_536, 4 * capacity), (key) => this.small.has(key) || this.main.has(key));
  }

  admitted(key: BlockHash): void {
    if (this.ghosts.delete(key)) this.main.set(key, 0);
    else this.small.set(key, true);
    this.links.added(key);
  }

  touchedChain(keys: readonly BlockHash[]): void {
    this.links.sawChain(keys);
  }

  touched(key: BlockHash, ready: boolean | null): void {
    if (ready !== true) return;
    if (this.small.delete(key)) {
      this.main.set(key, 0);
      return;
    }
    const freq = this.main.get(key);
    if (freq !== undefined) this.main.set(key, Math.min(MAX_FREQ, freq + 1));
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const victims: BlockHash[] = [];
    // Most calls want one victim: a Set for the chosen ones only when they may be many.
    const chosen: ChosenKeys = count > 8 ? new Set<BlockHash>() : new ArraySet(victims);
    const free = (key: BlockHash) => !chosen.has(key) && evictable(key);
    /** Queue blocks whose leaf went instead: the queues moved past them, still evictable. */
    const leafInstead: BlockHash[] = [];
    const take = (key: BlockHash) => {
      const leaf = this.links.deepestUnder(key, free, this.small.size + this.main.size);
      victims.push(leaf);
      chosen.add(leaf);
      if (leaf !== key) leafInstead.push(key);
    };
    if (this.links.hasOrphans) for (const orphan of this.links.orphanKeys()) {
      if (victims.length === count) break;
      if (free(orphan)) take(orphan);
    }
    const passedOver: BlockHash[] = [];
    let smallLeft = this.small.size;
    const smallKeys = this.small.keys();
    const mainKeys = this.main.entries();
    while (victims.length < count) {
      let picked = false;
      if (smallLeft > this.smallTarget) {
        for (let next = smallKeys.next(); next.done !== true; next = smallKeys.next()) {
          if (!free(next.value)) continue;
          take(next.value);
          smallLeft--;
          picked = true;
          break;
        }
      }
      if (!picked) {
        for (let next = mainKeys.next(); next.done !== true; next = mainKeys.next()) {
          const [key, freq] = next.value;
          if (!free(key)) continue;
          if (freq > 0) {
            passedOver.push(key);
            continue;
          }
          take(key);
          picked = true;
          break;
        }
      }
      // The main FIFO is exhausted here: what is left are the blocks passed over or moved past, and the small FIFO's rest.
      if (!picked) return this.fallback(victims, chosen, [...passedOver, ...leafInstead], smallKeys, count, free, passedOver);
    }
    this.passedOver = passedOver;
    return victims;
  }

  evicted(keys: readonly BlockHash[]): void {
    for (const key of keys) {
      if (this.small.delete(key)) remember(this.ghosts, key, this.ghostCapacity);
      else this.main.delete(key);
      this.links.removed(key);
    }
    // Second chances: one reuse spent, to the back of the main FIFO.
    for (const key of this.passedOver) {
      const freq = this.main.get(key);
      if (freq === undefined) continue;
      this.main.delete(key);
      this.main.set(key, freq - 1);
    }
    this.passedOver = [];
  }

  dropped(key: BlockHash): void {
    this.small.delete(key);
    this.main.delete(key);
    this.links.removed(key);
  }

  reset(): void {
    this.small.clear();
    this.main.clear();
    this.links.clearHeld();
    this.passedOver = [];
  }

  state(): S3FifoState {
    return { small: [...this.small.keys()], main: [...this.main.keys()], ghosts: [...this.ghosts.keys()] };
  }

  /**
   * The queues ran out of plain victims: `skipped` (blocks passed over for a
   * second chance, or whose leaf went instead), then the small-FIFO blocks not
   * visited yet (kept for its target). Every other held block was visited and
   * is not evictable, or was chosen.
   */
  private fallback(
    victims: BlockHash[],
    chosen: ChosenKeys,
    skipped: readonly BlockHash[],
    smallRest: Iterator<BlockHash>,
    count: number,
    free: (key: BlockHash) => boolean,
    passedOver: readonly BlockHash[],
  ): BlockHash[] | null {
    const consider = (key: BlockHash): boolean => {
      if (free(key)) {
        victims.push(key);
        chosen.add(key);
      }
      return victims.length === count;
    };
    let done = victims.length === count;
    for (let i = 0; i < skipped.length && !done; i++) done = consider(skipped[i]);
    for (let next = smallRest.next(); !done && next.done !== true; next = smallRest.next()) done = consider(next.value);
    if (victims.length < count) return null;
    this.passedOver = passedOver.filter((key) => !chosen.has(key));
    return victims;
  }
}

/** Adds `key` as the newest ghost and drops the oldest beyond `capacity`. */
function remember(ghosts: Map<BlockHash, true>, key: BlockHash, capacity: number): void {
  ghosts.set(key, true);
  if (ghosts.size > capacity) ghosts.delete(ghosts.keys().next().value as BlockHash);
}

/** An OffloadingManager over the CPU tier with S3-FIFO eviction, leaves first. */
export class S3FifoOffloadingManager extends CpuOffloadingManager {
  private readonly s3: S3FifoEvictionPolicy;

  constructor(options: CpuOffloadingManagerOptions) {
    const policy = new S3FifoEvictionPolicy(options.capacityBlocks);
    super(options, policy);
    this.s3 = policy;
  }

  /** A copy of the queues (for diagnostics and tests). */
  s3FifoState(): S3FifoState {
    return this.s3.state();
  }
}
