import { blockHashLane, type BlockHash } from '../core/block-hash.js';
import { BlockHashIndex } from '../core/block-hash-index.js';
import { ABSENT } from '../core/lane-hash-table.js';

/**
 * When each recently offered block was first offered to the tier, on a
 * clock that counts distinct offered blocks (the tier's traffic): stored or
 * passed by, a block offered again (a retry, or a store after it left) does
 * not move the clock. Bounded: offering a block beyond `capacity` remembered
 * ones forgets the oldest.
 *
 * Each block's first lookup after its offer is reported once, so a request
 * whose admission is tried again, or that reads its own blocks after a
 * preemption, does not count as reuse twice.
 *
 * The k-th distinct offer takes ring slot k mod capacity, so a slot's offer
 * time follows from the clock; keys are found through a BlockHashIndex, and
 * the per-offer state is typed arrays grown as the ring fills: offers and
 * lookups allocate nothing once it is full.
 */

/** Ring slots allocated up front; more as offers fill them, up to the capacity. */
const INITIAL_SLOTS = 1 << 12;
/** Entries the key index is sized for up front. */
const INDEX_ENTRIES = 1 << 16;

export class OfferHistory {
  /** Key of each ring slot; undefined before the ring first reaches it. */
  private readonly keys: (BlockHash | undefined)[] = [];
  /** 1 once the slot's first lookup was reported. */
  private looked: Uint8Array;
  /** Lanes of each slot's key, so forgetting it parses no key (the key being offered keeps the lane cache). */
  private lanes: Int32Array;
  private readonly index: BlockHashIndex;
  private clock = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`capacity must be an integer >= 1, got ${String(capacity)}`);
    }
    this.looked = new Uint8Array(Math.min(capacity, INITIAL_SLOTS));
    this.lanes = new Int32Array(2 * this.looked.length);
    // Sized for a full ring of the usual horizon up front: growing the table while the tier warms up costs more.
    this.index = new BlockHashIndex((slot) => this.keys[slot], Math.min(capacity, INDEX_ENTRIES));
  }

  /** Distinct blocks offered so far. */
  get now(): number {
    return this.clock;
  }

  /** `key` was offered: a key not remembered starts its history now (and true is returned). */
  offered(key: BlockHash): boolean {
    if (this.index.get(key) !== ABSENT) return false;
    const slot = this.clock % this.capacity;
    const forgotten = this.keys[slot];
    if (forgotten !== undefined) this.index.deleteWithLanes(forgotten, this.lanes[2 * slot], this.lanes[2 * slot + 1]);
    if (slot >= this.looked.length) this.grow();
    this.keys[slot] = key;
    this.looked[slot] = 0;
    this.lanes[2 * slot] = blockHashLane(key, 0);
    this.lanes[2 * slot + 1] = blockHashLane(key, 1);
    this.index.add(key, slot);
    this.clock++;
    return true;
  }

  /** Blocks of traffic since `key` was offered, or -1 when it is not remembered. */
  age(key: BlockHash): number {
    const slot = this.index.get(key);
    return slot === ABSENT ? -1 : this.ageOf(slot);
  }

  /**
   * `key` was looked up: its distance from the offer the first time after
   * that offer, else -1 (not remembered, or reported already).
   */
  firstLookup(key: BlockHash): number {
    const slot = this.index.get(key);
    if (slot === ABSENT || this.looked[slot] === 1) return -1;
    this.looked[slot] = 1;
    return this.ageOf(slot);
  }

  /** Traffic since the offer held in `slot`: the latest clock value below now that maps to it. */
  private ageOf(slot: number): number {
    return ((this.clock - 1 - slot) % this.capacity) + 1;
  }

  private grow(): void {
    const grown = new Uint8Array(Math.min(this.capacity, 2 * this.looked.length));
    grown.set(this.looked);
    this.looked = grown;
    const lanes = new Int32Array(2 * grown.length);
    lanes.set(this.lanes);
    this.lanes = lanes;
  }
}
