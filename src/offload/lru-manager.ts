import type { BlockHash } from '../core/block-hash.js';
import { ABSENT } from '../core/lane-hash-table.js';
import { CpuOffloadingManager, type CpuOffloadingManagerOptions } from './cpu-offloading-manager.js';
import type { EvictionPolicy, TierSlots } from './manager.js';
import { NO_SLOT, SlotFifo } from './slot-fifo.js';

/**
 * Least recently used: one list, oldest first. New blocks, touched blocks and
 * refreshed chains become the newest; eviction takes the oldest evictable
 * blocks.
 *
 * The list is intrusive and in typed arrays over the tier's CPU block ids,
 * which the manager hands to every call: no index of its own, no map entry
 * or object per block. Keys are read from the manager only to hand victims
 * back to a caller that asks by key.
 */
export class LruEvictionPolicy implements EvictionPolicy {
  private readonly order: SlotFifo;
  /** 1 while the block at that CPU block id is in the order. */
  private readonly queued: Uint8Array;
  private slots: TierSlots | null = null;

  constructor(capacity: number) {
    this.order = new SlotFifo(capacity);
    this.queued = new Uint8Array(capacity);
  }

  attach(slots: TierSlots): void {
    this.slots = slots;
  }

  admitted(_key: BlockHash, id: number): void {
    // A new block's id is never in the order: evicted and dropped blocks leave it.
    this.order.push(id);
    this.queued[id] = 1;
  }

  touched(_key: BlockHash, _ready: boolean | null, id: number): void {
    this.makeNewest(id);
  }

  readonly refreshReadsWholeChain = true;

  refreshedChain(_keys: readonly BlockHash[], ids: ArrayLike<number>, from: number, to: number): void {
    // Newest last: walking backwards leaves the chain's first block the most recent. A chain refreshed
    // before mostly still lies in the order as one run, last block first: each run moves in one splice.
    const order = this.order;
    for (let i = to - 1; i >= from; ) {
      const first = ids[i--];
      if (first === ABSENT || this.queued[first] === 0) continue;
      let last = first;
      while (i >= from && order.after(last) === ids[i] && ids[i] !== ABSENT) last = ids[i--];
      order.moveRunToNewest(first, last);
    }
  }

  chooseVictimIds(count: number, evictable: (id: number) => boolean): number[] | null {
    const victims: number[] = [];
    for (let id = this.order.oldest; id !== NO_SLOT && victims.length < count; id = this.order.after(id)) {
      if (evictable(id)) victims.push(id);
    }
    return victims.length === count ? victims : null;
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const victims: BlockHash[] = [];
    for (let id = this.order.oldest; id !== NO_SLOT && victims.length < count; id = this.order.after(id)) {
      const key = this.keyOf(id);
      if (evictable(key)) victims.push(key);
    }
    return victims.length === count ? victims : null;
  }

  evicted(_keys: readonly BlockHash[], ids: readonly number[]): void {
    for (let i = 0; i < ids.length; i++) this.remove(ids[i]);
  }

  dropped(_key: BlockHash, id: number): void {
    this.remove(id);
  }

  reset(): void {
    this.order.clear();
    this.queued.fill(0);
  }

  /** Held keys, least recently used first. */
  keysOldestFirst(): BlockHash[] {
    const out: BlockHash[] = [];
    for (let id = this.order.oldest; id !== NO_SLOT; id = this.order.after(id)) out.push(this.keyOf(id));
    return out;
  }

  private makeNewest(id: number): void {
    if (id === ABSENT || this.queued[id] === 0 || this.order.after(id) === NO_SLOT) return;
    this.order.remove(id);
    this.order.push(id);
  }

  private remove(id: number): void {
    if (id === ABSENT || this.queued[id] === 0) return;
    this.order.remove(id);
    this.queued[id] = 0;
  }

  private keyOf(id: number): BlockHash {
    if (this.slots === null) throw new RangeError(`LRU policy used before a manager attached it (block id ${id})`);
    return this.slots.keyOf(id);
  }
}

/** A manager of the CPU tier that evicts the least recently used block first. */
export function lruManager(options: CpuOffloadingManagerOptions): CpuOffloadingManager<LruEvictionPolicy> {
  return new CpuOffloadingManager(options, new LruEvictionPolicy(options.capacityBlocks));
}
