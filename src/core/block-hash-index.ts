import { blockHashLane, type BlockHash } from './block-hash.js';
import { ABSENT, LaneHashTable } from './lane-hash-table.js';

/**
 * Block hash -> slot number (an int32 >= 0 the owner assigns), keyed by the
 * hash's two 32-bit lanes in a LaneHashTable: no per-key map entry or
 * object on the heap. The owner keeps each slot's hash string (`keyOf`), so
 * a lookup confirms the text; a string whose lanes collide with another held
 * string (possible only for keys that are not 16 hex digits, whose lanes are
 * a fingerprint) goes to a small overflow map instead.
 */
export class BlockHashIndex {
  private readonly table: LaneHashTable;
  private overflow: Map<BlockHash, number> | null = null;

  constructor(
    private readonly keyOf: (slot: number) => BlockHash | undefined,
    expectedEntries = 0,
  ) {
    this.table = new LaneHashTable(expectedEntries);
  }

  get size(): number {
    return this.table.size + (this.overflow?.size ?? 0);
  }

  /** The slot of `key`, or ABSENT. */
  get(key: BlockHash): number {
    const slot = this.table.get(blockHashLane(key, 0), blockHashLane(key, 1));
    if (slot !== ABSENT && this.keyOf(slot) === key) return slot;
    return this.overflow?.get(key) ?? ABSENT;
  }

  /** Records `key` at `slot`; `key` must not be held. */
  add(key: BlockHash, slot: number): void {
    if (!this.table.setIfAbsent(blockHashLane(key, 0), blockHashLane(key, 1), slot)) {
      (this.overflow ??= new Map()).set(key, slot);
    }
  }

  /** Forgets `key`; false when it was not held. */
  delete(key: BlockHash): boolean {
    return this.deleteWithLanes(key, blockHashLane(key, 0), blockHashLane(key, 1));
  }

  /**
   * Forgets `key`, whose lanes (`blockHashLane(key, 0)` and `(key, 1)`) the
   * caller kept, without computing them again; false when it was not held.
   */
  deleteWithLanes(key: BlockHash, a: number, b: number): boolean {
    const slot = this.table.get(a, b);
    if (slot !== ABSENT && this.keyOf(slot) === key) return this.table.delete(a, b);
    return this.overflow?.delete(key) ?? false;
  }

  clear(): void {
    this.table.clear();
    this.overflow = null;
  }
}
