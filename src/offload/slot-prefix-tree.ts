import type { BlockHash } from '../core/block-hash.js';
import { ABSENT } from '../core/lane-hash-table.js';
import type { TierSlots } from './manager.js';
import { RememberedParents } from './remembered-parents.js';
import { NO_SLOT, SlotFifo } from './slot-fifo.js';

/**
 * Which held block extends which: the prefix tree of the CPU tier's blocks,
 * over their CPU block ids (the tier's slots).
 *
 * A key is a chained hash, so its parent (the key of the offloaded block
 * before it in every prompt holding it) never changes. Lookups see whole
 * prompts, first block first (`OffloadingManager.touch`), and every store
 * shows its request's chain up to the blocks stored (`refresh`), so the
 * parent of each key is learned there, the blocks a request computed after
 * its lookup included. The parents lookups show are remembered for a
 * bounded number of keys (RememberedParents), long enough for a block
 * computed after its lookup to be stored. Children are linked only between
 * held blocks.
 *
 * A block is worth nothing without its parent (a prefix hit stops at the
 * first missing block), so policies evict leaves first and treat a block
 * whose parent left (an orphan) as the first to go.
 *
 * The links are typed arrays indexed by slot: each held block's linked
 * parent, its children as an intrusive list in the order they were linked,
 * and the orphans as a SlotFifo, oldest first. Linking, unlinking and
 * walking allocate nothing.
 */
export class SlotPrefixTree {
  private readonly parents: RememberedParents;
  /** The slot each held slot is linked under, or NO_SLOT. */
  private readonly linkedParent: Int32Array;
  private readonly firstChild: Int32Array;
  private readonly lastChild: Int32Array;
  private readonly nextSibling: Int32Array;
  private readonly prevSibling: Int32Array;
  /**
   * Ring position of each held slot's remembered parent, or ABSENT; valid
   * while the ring still holds the slot's key there (it forgets the oldest).
   */
  private readonly parentPosition: Int32Array;
  private readonly orphans: SlotFifo;
  private readonly isOrphan: Uint8Array;

  constructor(
    capacity: number,
    maxRemembered: number,
    private readonly slots: TierSlots,
  ) {
    this.parents = new RememberedParents(maxRemembered);
    this.linkedParent = new Int32Array(capacity).fill(NO_SLOT);
    this.firstChild = new Int32Array(capacity).fill(NO_SLOT);
    this.lastChild = new Int32Array(capacity).fill(NO_SLOT);
    this.nextSibling = new Int32Array(capacity);
    this.prevSibling = new Int32Array(capacity);
    this.parentPosition = new Int32Array(capacity).fill(ABSENT);
    this.orphans = new SlotFifo(capacity);
    this.isOrphan = new Uint8Array(capacity);
  }

  /**
   * `chain` is one prompt's keys, first block first (each key's parent is the
   * key before it); `ids[i]` is the slot of `chain[i]` when held, else ABSENT.
   * Only `chain[from, to)` is read: the parents of the keys after `from` are
   * learned (the ones before were seen already).
   */
  sawChain(chain: readonly BlockHash[], ids: ArrayLike<number>, from = 0, to = chain.length): void {
    const parents = this.parents;
    for (let i = from + 1; i < to; i++) {
      const child = chain[i];
      let position = parents.positionOf(child);
      let parent: BlockHash;
      if (position === ABSENT) {
        parent = chain[i - 1];
        position = parents.add(child, parent);
      } else {
        parent = parents.parentAt(position);
      }
      const childId = ids[i];
      if (childId === ABSENT) continue;
      this.parentPosition[childId] = position;
      const parentId = parent === chain[i - 1] ? ids[i - 1] : this.slots.idOf(parent);
      if (parentId !== ABSENT) this.link(parentId, childId);
    }
  }

  /**
   * sawChain for a chain whose keys `chain[from + 1, to)` a store just
   * offered: a held key after a held one is linked under it directly,
   * without remembering its parent (the link is what eviction reads, and the
   * key's next lookup remembers the parent), which keeps a store's cost to a
   * link per block; any other key is learned as sawChain learns it.
   */
  sawStoredChain(chain: readonly BlockHash[], ids: ArrayLike<number>, from: number, to: number): void {
    for (let i = from + 1; i < to; i++) {
      const childId = ids[i];
      const parentId = ids[i - 1];
      if (childId !== ABSENT && parentId !== ABSENT) this.link(parentId, childId);
      else this.sawChain(chain, ids, i - 1, i + 1);
    }
  }

  /** Slot `id` now holds `key`: link it under its held parent, if known, and adopt its orphaned children. */
  added(key: BlockHash, id: number): void {
    this.parentPosition[id] = ABSENT;
    if (this.parents.size === 0) return;
    const position = this.parents.positionOf(key);
    this.parentPosition[id] = position;
    if (position !== ABSENT) {
      const parent = this.parents.parentAt(position);
      if (parent !== key) {
        const parentId = this.slots.idOf(parent);
        if (parentId !== ABSENT) this.link(parentId, id);
      }
    }
    // A parent stored again adopts the children that outlived it.
    for (let orphan = this.orphans.oldest; orphan !== NO_SLOT; ) {
      const next = this.orphans.after(orphan);
      if (this.rememberedParentOf(orphan) === key) this.link(id, orphan);
      orphan = next;
    }
  }

  /** Slot `id` left the tier: its held children become orphans. */
  removed(id: number): void {
    if (this.isOrphan[id] === 1) this.dropOrphan(id);
    this.unlink(id);
    for (let child = this.firstChild[id]; child !== NO_SLOT; ) {
      const next = this.nextSibling[child];
      this.linkedParent[child] = NO_SLOT;
      this.isOrphan[child] = 1;
      this.orphans.push(child);
      child = next;
    }
    this.firstChild[id] = NO_SLOT;
    this.lastChild[id] = NO_SLOT;
  }

  get hasOrphans(): boolean {
    return this.orphans.size > 0;
  }

  /** The oldest orphan (held, its parent gone), or NO_SLOT. */
  get oldestOrphan(): number {
    return this.orphans.oldest;
  }

  /** The orphan after `id`, or NO_SLOT. */
  orphanAfter(id: number): number {
    return this.orphans.after(id);
  }

  /**
   * The deepest held slot under `id` along children `accept` takes (the
   * first such child at each level, in link order), or `id` itself when no
   * child qualifies. Bounded by `maxSteps`, so a malformed chain (a cycle)
   * cannot loop.
   */
  deepestUnder(id: number, accept: (id: number) => boolean, maxSteps: number): number {
    let current = id;
    for (let step = 0; step < maxSteps; step++) {
      let next = NO_SLOT;
      for (let child = this.firstChild[current]; child !== NO_SLOT; child = this.nextSibling[child]) {
        if (accept(child)) {
          next = child;
          break;
        }
      }
      if (next === NO_SLOT) return current;
      current = next;
    }
    return current;
  }

  /** The tier lost every block; parents stay remembered (they are facts about hashes). */
  clearHeld(): void {
    this.linkedParent.fill(NO_SLOT);
    this.firstChild.fill(NO_SLOT);
    this.lastChild.fill(NO_SLOT);
    this.orphans.clear();
    this.isOrphan.fill(0);
  }

  /** The remembered parent of held slot `id`'s key, or undefined. */
  private rememberedParentOf(id: number): BlockHash | undefined {
    const position = this.parentPosition[id];
    if (position === ABSENT || this.parents.keyAt(position) !== this.slots.keyOf(id)) return undefined;
    return this.parents.parentAt(position);
  }

  private dropOrphan(id: number): void {
    this.isOrphan[id] = 0;
    this.orphans.remove(id);
  }

  private unlink(child: number): void {
    const parent = this.linkedParent[child];
    if (parent === NO_SLOT) return;
    this.linkedParent[child] = NO_SLOT;
    const prev = this.prevSibling[child];
    const next = this.nextSibling[child];
    if (prev === NO_SLOT) this.firstChild[parent] = next;
    else this.nextSibling[prev] = next;
    if (next === NO_SLOT) this.lastChild[parent] = prev;
    else this.prevSibling[next] = prev;
  }

  private link(parent: number, child: number): void {
    if (parent === child || this.linkedParent[child] === parent) return;
    this.unlink(child);
    this.linkedParent[child] = parent;
    const last = this.lastChild[parent];
    this.prevSibling[child] = last;
    this.nextSibling[child] = NO_SLOT;
    if (last === NO_SLOT) this.firstChild[parent] = child;
    else this.nextSibling[last] = child;
    this.lastChild[parent] = child;
    if (this.isOrphan[child] === 1) this.dropOrphan(child);
  }
}
