import { blockHashLane, type BlockHash } from '../core/block-hash.js';
import { BlockHashIndex } from '../core/block-hash-index.js';
import { ABSENT } from '../core/lane-hash-table.js';
import { LaneFilter } from '../core/lane-filter.js';

/** Entries the index is sized for up front; it grows as the ring fills. */
const INITIAL_ENTRIES = 1 << 12;

/**
 * The parent of each recently seen key (the key before it in a lookup's
 * chain), for a bounded number of keys: the first parent seen for a key
 * stays until `capacity` newer keys pushed it out, oldest first. A ring of
 * (key, parent) string references found through a BlockHashIndex, so
 * remembering allocates nothing beyond the ring's growth to its capacity.
 */
export class RememberedParents {
  private readonly children: BlockHash[] = [];
  private readonly parents: BlockHash[] = [];
  /** Lanes of each ring position's key, so pushing it out parses nothing. */
  private lanes = new Int32Array(2 * INITIAL_ENTRIES);
  /** Ring position the next key goes to (the oldest once the ring is full). */
  private nextPosition = 0;
  private readonly index: BlockHashIndex;
  /**
   * Most stored blocks were never in a lookup's chain: this answers them without probing the index.
   * Sized to the keys the ring holds and rebuilt larger as it fills: one sized for the capacity is
   * mostly empty while the ring fills, and reading it is a cache miss per stored block.
   */
  private filter: LaneFilter;

  constructor(readonly capacity: number) {
    this.index = new BlockHashIndex((position) => this.children[position], Math.min(capacity, INITIAL_ENTRIES));
    this.filter = new LaneFilter(Math.min(capacity, INITIAL_ENTRIES));
  }

  get size(): number {
    return this.children.length;
  }

  /** The remembered parent of `key`, or undefined. */
  get(key: BlockHash): BlockHash | undefined {
    const position = this.positionOf(key);
    return position === ABSENT ? undefined : this.parents[position];
  }

  /** The ring position of `key`, or ABSENT (see `parentAt`). */
  positionOf(key: BlockHash): number {
    if (!this.filter.mayHave(blockHashLane(key, 0), blockHashLane(key, 1))) return ABSENT;
    return this.index.get(key);
  }

  /** The key remembered at ring `position`. */
  keyAt(position: number): BlockHash {
    return this.children[position];
  }

  /** The parent remembered at ring `position`. */
  parentAt(position: number): BlockHash {
    return this.parents[position];
  }

  /** Remembers `parent` for `key` (not remembered yet), forgetting the oldest key when full; returns its ring position. */
  add(key: BlockHash, parent: BlockHash): number {
    const position = this.nextPosition;
    const lanes = this.lanes;
    if (position < this.children.length) {
      this.index.deleteWithLanes(this.children[position], lanes[2 * position], lanes[2 * position + 1]);
      this.filter.remove(lanes[2 * position], lanes[2 * position + 1]);
      this.children[position] = key;
      this.parents[position] = parent;
    } else {
      this.children.push(key);
      this.parents.push(parent);
      if (2 * position >= lanes.length) {
        this.lanes = new Int32Array(Math.min(2 * lanes.length, 2 * this.capacity));
        this.lanes.set(lanes);
      }
      if (this.filter.outgrownBy(this.children.length)) this.growFilter();
    }
    const a = blockHashLane(key, 0);
    const b = blockHashLane(key, 1);
    this.lanes[2 * position] = a;
    this.lanes[2 * position + 1] = b;
    this.filter.add(a, b);
    this.index.add(key, position);
    this.nextPosition = position + 1 === this.capacity ? 0 : position + 1;
    return position;
  }

  /** Builds the filter anew for twice the keys the ring holds, from their kept lanes (the newest is added by the caller). */
  private growFilter(): void {
    const held = this.children.length - 1;
    const filter = new LaneFilter(Math.min(this.capacity, 2 * this.children.length));
    const lanes = this.lanes;
    for (let position = 0; position < held; position++) filter.add(lanes[2 * position], lanes[2 * position + 1]);
    this.filter = filter;
  }
}
