import type { BlockHash } from '../core/block-hash.js';
import { ABSENT } from '../core/lane-hash-table.js';
import { GhostKeys } from './ghost-keys.js';
import { CpuOffloadingManager, type CpuOffloadingManagerOptions } from './cpu-offloading-manager.js';
import type { EvictionPolicy, TierSlots } from './manager.js';
import { NO_SLOT, SlotFifo } from './slot-fifo.js';
import { SlotList } from './slot-list.js';
import { SlotPrefixTree } from './slot-prefix-tree.js';
import { VictimChoice } from './victim-choice.js';

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
 *
 * The queues, the reuse counts and the prefix tree are typed arrays over the
 * tier's CPU block ids, which the manager hands over with every call, so the
 * store and evict path looks no key up again and allocates no per-block
 * entry; only ghosts (keys no longer held) are found by key.
 */

/** The small FIFO's share of the tier. */
const SMALL_SHARE = 0.1;
/** Ghost keys remembered, in tier capacities. */
const GHOST_CAPACITIES = 4;
/** Largest reuse count (second chances in the main FIFO). */
const MAX_FREQ = 3;

/** Which FIFO holds a block id. */
const IN_NONE = 0;
const IN_SMALL = 1;
const IN_MAIN = 2;

export interface S3FifoState {
  /** Small FIFO, oldest first. */
  readonly small: readonly BlockHash[];
  /** Main FIFO, oldest first. */
  readonly main: readonly BlockHash[];
  /** Ghost keys, oldest first. */
  readonly ghosts: readonly BlockHash[];
}

const NO_SLOTS: TierSlots = {
  idOf: () => ABSENT,
  keyOf: (id) => {
    throw new RangeError(`S3-FIFO policy used before a manager attached it (block id ${id})`);
  },
};

export class S3FifoEvictionPolicy implements EvictionPolicy {
  private readonly small: SlotFifo;
  private readonly main: SlotFifo;
  /** IN_NONE, IN_SMALL or IN_MAIN per block id. */
  private readonly queueOf: Uint8Array;
  /** Reuse count of each main-FIFO block. */
  private readonly freq: Uint8Array;
  private readonly ghosts: GhostKeys;
  private readonly tree: SlotPrefixTree;
  private readonly smallTarget: number;
  private slots: TierSlots = NO_SLOTS;
  /** Main blocks the last choice passed over (second chances to apply when it is carried out). */
  private readonly passedOver = new SlotList();
  /** Queue blocks whose leaf went instead during the current choice. */
  private readonly leafInstead = new SlotList();
  private readonly choice: VictimChoice;
  private readonly isFree: (id: number) => boolean;

  constructor(capacity: number) {
    this.small = new SlotFifo(capacity);
    this.main = new SlotFifo(capacity);
    this.queueOf = new Uint8Array(capacity);
    this.freq = new Uint8Array(capacity);
    this.choice = new VictimChoice(capacity);
    this.isFree = this.choice.isFree;
    this.smallTarget = Math.max(1, Math.floor(capacity * SMALL_SHARE));
    this.ghosts = new GhostKeys(Math.max(1, GHOST_CAPACITIES * capacity));
    // The tree reads ids and keys through `slots`, set when the manager attaches.
    this.tree = new SlotPrefixTree(capacity, Math.max(65_536, 4 * capacity), {
      idOf: (key) => this.slots.idOf(key),
      keyOf: (id) => this.slots.keyOf(id),
    });
  }

  attach(slots: TierSlots): void {
    this.slots = slots;
  }

  admitted(key: BlockHash, id: number): void {
    if (this.ghosts.delete(key)) this.pushMain(id, 0);
    else {
      this.queueOf[id] = IN_SMALL;
      this.small.push(id);
    }
    this.tree.added(key, id);
  }

  touchedChain(keys: readonly BlockHash[], ids: ArrayLike<number>): void {
    this.tree.sawChain(keys, ids);
  }

  readonly refreshReadsWholeChain = false;

  /** The queues keep their order (a request extending its chain reuses nothing); the tree learns the offered blocks' parents. */
  refreshedChain(keys: readonly BlockHash[], ids: ArrayLike<number>, from: number, to: number): void {
    this.tree.sawStoredChain(keys, ids, from, to);
  }

  touched(_key: BlockHash, ready: boolean | null, id: number): void {
    if (ready !== true) return;
    const queue = this.queueOf[id];
    if (queue === IN_SMALL) {
      this.small.remove(id);
      this.pushMain(id, 0);
    } else if (queue === IN_MAIN && this.freq[id] < MAX_FREQ) {
      this.freq[id]++;
    }
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const ids = this.chooseVictimIds(count, (id) => evictable(this.slots.keyOf(id)));
    return ids === null ? null : ids.map((id) => this.slots.keyOf(id));
  }

  chooseVictimIds(count: number, evictable: (id: number) => boolean): number[] | null {
    this.choice.begin(evictable);
    const victims: number[] = [];
    const passedOver = this.passedOver;
    passedOver.clear();
    this.leafInstead.clear();
    const free = this.isFree;
    const tree = this.tree;
    if (tree.hasOrphans) {
      for (let orphan = tree.oldestOrphan; orphan !== NO_SLOT && victims.length < count; orphan = tree.orphanAfter(orphan)) {
        if (free(orphan)) this.take(orphan, victims);
      }
    }
    let smallLeft = this.small.size;
    let smallNext = this.small.oldest;
    let mainNext = this.main.oldest;
    while (victims.length < count) {
      let picked = false;
      if (smallLeft > this.smallTarget) {
        while (smallNext !== NO_SLOT) {
          const id = smallNext;
          smallNext = this.small.after(id);
          if (!free(id)) continue;
          this.take(id, victims);
          smallLeft--;
          picked = true;
          break;
        }
      }
      if (!picked) {
        while (mainNext !== NO_SLOT) {
          const id = mainNext;
          mainNext = this.main.after(id);
          if (!free(id)) continue;
          if (this.freq[id] > 0) {
            passedOver.push(id);
            continue;
          }
          this.take(id, victims);
          picked = true;
          break;
        }
      }
      // The main FIFO is exhausted here: what is left are the blocks passed over or moved past, and the small FIFO's rest.
      if (!picked) return this.fallback(victims, smallNext, count);
    }
    return victims;
  }

  evicted(keys: readonly BlockHash[], ids: readonly number[]): void {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      const queue = this.queueOf[id];
      if (queue === IN_SMALL) {
        this.small.remove(id);
        this.ghosts.add(keys[i]);
      } else if (queue === IN_MAIN) {
        this.main.remove(id);
      }
      this.queueOf[id] = IN_NONE;
      this.tree.removed(id);
    }
    // Second chances: one reuse spent, to the back of the main FIFO.
    const passedOver = this.passedOver;
    for (let i = 0; i < passedOver.length; i++) {
      const id = passedOver.at(i);
      if (this.queueOf[id] !== IN_MAIN) continue;
      this.main.remove(id);
      this.main.push(id);
      this.freq[id]--;
    }
    passedOver.clear();
  }

  dropped(_key: BlockHash, id: number): void {
    const queue = this.queueOf[id];
    if (queue === IN_SMALL) this.small.remove(id);
    else if (queue === IN_MAIN) this.main.remove(id);
    this.queueOf[id] = IN_NONE;
    this.tree.removed(id);
  }

  reset(): void {
    this.small.clear();
    this.main.clear();
    this.queueOf.fill(IN_NONE);
    this.tree.clearHeld();
    this.passedOver.clear();
  }

  state(): S3FifoState {
    return { small: this.keysOf(this.small), main: this.keysOf(this.main), ghosts: this.ghosts.list() };
  }

  private keysOf(queue: SlotFifo): BlockHash[] {
    const out: BlockHash[] = [];
    for (let id = queue.oldest; id !== NO_SLOT; id = queue.after(id)) out.push(this.slots.keyOf(id));
    return out;
  }

  private pushMain(id: number, freq: number): void {
    this.queueOf[id] = IN_MAIN;
    this.freq[id] = freq;
    this.main.push(id);
  }

  /** Chooses the deepest free block under queue block `id`. */
  private take(id: number, victims: number[]): void {
    const leaf = this.tree.deepestUnder(id, this.isFree, this.small.size + this.main.size);
    victims.push(leaf);
    this.choice.take(leaf);
    if (leaf !== id) this.leafInstead.push(id);
  }

  /**
   * The queues ran out of plain victims: the blocks passed over for a second
   * chance, then those whose leaf went instead, then the small-FIFO blocks
   * from `smallNext` on (not visited yet, kept for its target). Every other
   * held block was visited and is not evictable, or was chosen.
   */
  private fallback(victims: number[], smallNext: number, count: number): number[] | null {
    const passedOver = this.passedOver;
    const leafInstead = this.leafInstead;
    for (let i = 0; i < passedOver.length && victims.length < count; i++) this.consider(passedOver.at(i), victims);
    for (let i = 0; i < leafInstead.length && victims.length < count; i++) this.consider(leafInstead.at(i), victims);
    for (let id = smallNext; id !== NO_SLOT && victims.length < count; id = this.small.after(id)) this.consider(id, victims);
    if (victims.length < count) {
      passedOver.clear();
      return null;
    }
    // Passed-over blocks chosen after all get no second chance.
    passedOver.keepIf((id) => !this.choice.took(id));
    return victims;
  }

  private consider(id: number, victims: number[]): void {
    if (!this.isFree(id)) return;
    victims.push(id);
    this.choice.take(id);
  }
}

/** A manager of the CPU tier with S3-FIFO eviction, leaves first. */
export function s3FifoManager(options: CpuOffloadingManagerOptions): CpuOffloadingManager<S3FifoEvictionPolicy> {
  return new CpuOffloadingManager(options, new S3FifoEvictionPolicy(options.capacityBlocks));
}
