import { blockHashLane, type BlockHash } from '../core/block-hash.js';
import { BlockHashIndex } from '../core/block-hash-index.js';
import { ABSENT } from '../core/lane-hash-table.js';
import { LaneFilter } from '../core/lane-filter.js';
import { NO_SLOT, SlotFifo } from './slot-fifo.js';

/** Nodes allocated up front; more as the keys fill them, up to the capacity. */
const INITIAL_NODES = 1 << 12;

/**
 * Keys no longer held, remembered oldest first up to a fixed count: adding
 * one beyond it forgets the oldest. A node per key, in typed arrays (a
 * SlotFifo for the order, a free-node list) found through a BlockHashIndex,
 * so remembering and forgetting allocate nothing once the nodes exist; the
 * only per-key reference is the key string, kept to confirm lookups and to
 * list the keys.
 */
export class GhostKeys {
  private readonly order: SlotFifo;
  /** Key per node; undefined for a free node. */
  private readonly keys: (BlockHash | undefined)[] = [];
  /** Lanes of each node's key, so forgetting the oldest computes none (the key just evicted has them cached). */
  private lanes: Int32Array;
  /** Freed nodes (reused before new ones are taken). */
  private freeNodes: Int32Array;
  private freeCount = 0;
  private readonly index: BlockHashIndex;
  /** Most stored keys were never evicted: this answers them without probing the index. */
  private readonly filter: LaneFilter;

  constructor(readonly capacity: number) {
    const initial = Math.min(capacity, INITIAL_NODES);
    this.order = new SlotFifo(initial);
    this.freeNodes = new Int32Array(initial);
    this.lanes = new Int32Array(2 * initial);
    this.index = new BlockHashIndex((node) => this.keys[node], initial);
    this.filter = new LaneFilter(capacity);
  }

  get size(): number {
    return this.order.size;
  }

  /** Remembers `key` (not remembered yet) as the newest, forgetting the oldest when full. */
  add(key: BlockHash): void {
    if (this.order.size === this.capacity) this.forget(this.order.oldest);
    const node = this.takeNode();
    this.keys[node] = key;
    const a = blockHashLane(key, 0);
    const b = blockHashLane(key, 1);
    this.lanes[2 * node] = a;
    this.lanes[2 * node + 1] = b;
    this.filter.add(a, b);
    this.index.add(key, node);
    this.order.push(node);
  }

  /** Forgets `key`; false when it was not remembered. */
  delete(key: BlockHash): boolean {
    if (this.order.size === 0 || !this.filter.mayHave(blockHashLane(key, 0), blockHashLane(key, 1))) return false;
    const node = this.index.get(key);
    if (node === ABSENT) return false;
    this.forget(node);
    return true;
  }

  /** Remembered keys, oldest first. */
  list(): BlockHash[] {
    const out: BlockHash[] = [];
    for (let node = this.order.oldest; node !== NO_SLOT; node = this.order.after(node)) out.push(this.keys[node] as BlockHash);
    return out;
  }

  private takeNode(): number {
    if (this.freeCount > 0) return this.freeNodes[--this.freeCount];
    const node = this.keys.length;
    this.keys.push(undefined);
    if (node >= this.order.capacity) {
      const grown = Math.min(this.capacity, 2 * this.order.capacity);
      this.order.grow(grown);
      const freeNodes = new Int32Array(grown);
      freeNodes.set(this.freeNodes);
      this.freeNodes = freeNodes;
      const lanes = new Int32Array(2 * grown);
      lanes.set(this.lanes);
      this.lanes = lanes;
    }
    return node;
  }

  private forget(node: number): void {
    const a = this.lanes[2 * node];
    const b = this.lanes[2 * node + 1];
    this.index.deleteWithLanes(this.keys[node] as BlockHash, a, b);
    this.filter.remove(a, b);
    this.keys[node] = undefined;
    this.order.remove(node);
    this.freeNodes[this.freeCount++] = node;
  }
}
