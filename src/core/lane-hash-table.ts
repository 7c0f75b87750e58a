/**
 * A hash table from 64-bit keys, given as two uint32 lanes, to non-negative
 * int32 values, in typed arrays: open addressing with linear probing, and
 * backward-shift deletion, so no tombstones build up. It holds no JS objects
 * (nothing for the garbage collector to trace, however many entries) and
 * allocates only when it grows.
 *
 * Block hashes are already well-mixed 64-bit values, so the slot is taken
 * from both lanes directly.
 */

/** What `get` answers for a key the table does not hold. */
export const ABSENT = -1;

const MIN_CAPACITY = 16;

export class LaneHashTable {
  /** Two uint32 lanes per slot, lane a first. */
  private keys: Uint32Array;
  /** The value per slot; ABSENT marks an empty slot. */
  private values: Int32Array;
  private mask: number;
  private count = 0;

  /** `expectedEntries`: room for that many before the first growth. */
  constructor(expectedEntries = 0) {
    let capacity = MIN_CAPACITY;
    // Load factor at most 1/2: probes stay short.
    while (capacity < expectedEntries * 2) capacity *= 2;
    this.keys = new Uint32Array(capacity * 2);
    this.values = new Int32Array(capacity).fill(ABSENT);
    this.mask = capacity - 1;
  }

  get size(): number {
    return this.count;
  }

  /** Slots allocated (a power of two). */
  get capacity(): number {
    return this.mask + 1;
  }

  /** The value stored under (a, b), or ABSENT. */
  get(a: number, b: number): number {
    const slot = this.find(a >>> 0, b >>> 0);
    return slot < 0 ? ABSENT : this.values[slot];
  }

  has(a: number, b: number): boolean {
    return this.find(a >>> 0, b >>> 0) >= 0;
  }

  /** Stores `value` (an int32 >= 0) under (a, b), replacing what was there. */
  set(a: number, b: number, value: number): void {
    if (!Number.isInteger(value) || value < 0 || value > 0x7fffffff) {
      throw new RangeError(`LaneHashTable values are int32 >= 0, got ${value}`);
    }
    a >>>= 0;
    b >>>= 0;
    const keys = this.keys;
    const values = this.values;
    let slot = slotOf(a, b, this.mask);
    while (values[slot] !== ABSENT) {
      if (keys[2 * slot] === a && keys[2 * slot + 1] === b) {
        values[slot] = value;
        return;
      }
      slot = (slot + 1) & this.mask;
    }
    keys[2 * slot] = a;
    keys[2 * slot + 1] = b;
    values[slot] = value;
    this.count++;
    if (this.count * 2 > this.capacity) this.grow();
  }

  /** Removes (a, b); false when it was absent. */
  delete(a: number, b: number): boolean {
    let hole = this.find(a >>> 0, b >>> 0);
    if (hole < 0) return false;
    const keys = this.keys;
    const values = this.values;
    const mask = this.mask;
    // Backward shift: move later entries of the probe run into the hole when
    // their home slot does not lie (cyclically) after the hole.
    let slot = (hole + 1) & mask;
    while (values[slot] !== ABSENT) {
      const home = slotOf(keys[2 * slot], keys[2 * slot + 1], mask);
      if (((slot - home) & mask) >= ((slot - hole) & mask)) {
        keys[2 * hole] = keys[2 * slot];
        keys[2 * hole + 1] = keys[2 * slot + 1];
        values[hole] = values[slot];
        hole = slot;
      }
      slot = (slot + 1) & mask;
    }
    values[hole] = ABSENT;
    this.count--;
    return true;
  }

  clear(): void {
    this.values.fill(ABSENT);
    this.count = 0;
  }

  /** Calls `visit` with every entry, in slot order (consistency checks and tests). */
  forEach(visit: (a: number, b: number, value: number) => void): void {
    const keys = this.keys;
    const values = this.values;
    for (let slot = 0; slot < values.length; slot++) {
      if (values[slot] !== ABSENT) visit(keys[2 * slot], keys[2 * slot + 1], values[slot]);
    }
  }

  /** The slot holding (a, b), or -1. */
  private find(a: number, b: number): number {
    const keys = this.keys;
    const values = this.values;
    let slot = slotOf(a, b, this.mask);
    while (values[slot] !== ABSENT) {
      if (keys[2 * slot] === a && keys[2 * slot + 1] === b) return slot;
      slot = (slot + 1) & this.mask;
    }
    return -1;
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldValues = this.values;
    const capacity = (this.mask + 1) * 2;
    this.keys = new Uint32Array(capacity * 2);
    this.values = new Int32Array(capacity).fill(ABSENT);
    this.mask = capacity - 1;
    const keys = this.keys;
    const values = this.values;
    for (let old = 0; old < oldValues.length; old++) {
      if (oldValues[old] === ABSENT) continue;
      const a = oldKeys[2 * old];
      const b = oldKeys[2 * old + 1];
      let slot = slotOf(a, b, this.mask);
      while (values[slot] !== ABSENT) slot = (slot + 1) & this.mask;
      keys[2 * slot] = a;
      keys[2 * slot + 1] = b;
      values[slot] = oldValues[old];
    }
  }
}

/** Home slot of (a, b): both lanes folded, so keys that share one lane still spread. */
function slotOf(a: number, b: number, mask: number): number {
  return (a ^ Math.imul(b, 0x9e3779b1) ^ (b >>> 16)) & mask;
}
