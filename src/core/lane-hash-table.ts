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
  /**
   * Slot i is slots[4i .. 4i+3]: lane a, lane b (as int32), the value (ABSENT:
   * empty), unused. One slot per 16 bytes, so a probe touches one cache line.
   */
  private slots: Int32Array;
  private mask: number;
  private count = 0;

  /** `expectedEntries`: room for that many before the first growth. */
  constructor(expectedEntries = 0) {
    let capacity = MIN_CAPACITY;
    // Load factor at most 1/2: probes stay short.
    while (capacity < expectedEntries * 2) capacity *= 2;
    this.slots = emptySlots(capacity);
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
    const slot = this.find(a | 0, b | 0);
    return slot < 0 ? ABSENT : this.slots[4 * slot + 2];
  }

  has(a: number, b: number): boolean {
    return this.find(a | 0, b | 0) >= 0;
  }

  /** Stores `value` (an int32 >= 0) under (a, b), replacing what was there. */
  set(a: number, b: number, value: number): void {
    this.insert(a, b, value, true);
  }

  /** Stores `value` under (a, b) unless the key is present; true when it was stored. One probe for both. */
  setIfAbsent(a: number, b: number, value: number): boolean {
    return this.insert(a, b, value, false);
  }

  /** Removes (a, b); false when it was absent. */
  delete(a: number, b: number): boolean {
    let hole = this.find(a | 0, b | 0);
    if (hole < 0) return false;
    const slots = this.slots;
    const mask = this.mask;
    // Backward shift: move later entries of the probe run into the hole when
    // their home slot does not lie (cyclically) after the hole.
    let slot = (hole + 1) & mask;
    while (slots[4 * slot + 2] !== ABSENT) {
      const home = slotOf(slots[4 * slot], slots[4 * slot + 1], mask);
      if (((slot - home) & mask) >= ((slot - hole) & mask)) {
        slots[4 * hole] = slots[4 * slot];
        slots[4 * hole + 1] = slots[4 * slot + 1];
        slots[4 * hole + 2] = slots[4 * slot + 2];
        hole = slot;
      }
      slot = (slot + 1) & mask;
    }
    slots[4 * hole + 2] = ABSENT;
    this.count--;
    return true;
  }

  clear(): void {
    const slots = this.slots;
    for (let i = 2; i < slots.length; i += 4) slots[i] = ABSENT;
    this.count = 0;
  }

  /** Calls `visit` with every entry (lanes as uint32), in slot order (consistency checks and tests). */
  forEach(visit: (a: number, b: number, value: number) => void): void {
    const slots = this.slots;
    for (let i = 0; i < slots.length; i += 4) {
      if (slots[i + 2] !== ABSENT) visit(slots[i] >>> 0, slots[i + 1] >>> 0, slots[i + 2]);
    }
  }

  private insert(a: number, b: number, value: number, replace: boolean): boolean {
    if (!Number.isInteger(value) || value < 0 || value > 0x7fffffff) {
      throw new RangeError(`LaneHashTable values are int32 >= 0, got ${value}`);
    }
    a |= 0;
    b |= 0;
    const slots = this.slots;
    const mask = this.mask;
    let slot = slotOf(a, b, mask);
    while (slots[4 * slot + 2] !== ABSENT) {
      if (slots[4 * slot] === a && slots[4 * slot + 1] === b) {
        if (replace) slots[4 * slot + 2] = value;
        return replace;
      }
      slot = (slot + 1) & mask;
    }
    slots[4 * slot] = a;
    slots[4 * slot + 1] = b;
    slots[4 * slot + 2] = value;
    this.count++;
    if (this.count * 2 > mask + 1) this.grow();
    return true;
  }

  /** The slot holding (a, b) (lanes as int32), or -1. */
  private find(a: number, b: number): number {
    const slots = this.slots;
    const mask = this.mask;
    let slot = slotOf(a, b, mask);
    while (slots[4 * slot + 2] !== ABSENT) {
      if (slots[4 * slot] === a && slots[4 * slot + 1] === b) return slot;
      slot = (slot + 1) & mask;
    }
    return -1;
  }

  private grow(): void {
    const old = this.slots;
    const capacity = (this.mask + 1) * 2;
    const slots = emptySlots(capacity);
    const mask = capacity - 1;
    for (let i = 0; i < old.length; i += 4) {
      if (old[i + 2] === ABSENT) continue;
      let slot = slotOf(old[i], old[i + 1], mask);
      while (slots[4 * slot + 2] !== ABSENT) slot = (slot + 1) & mask;
      slots[4 * slot] = old[i];
      slots[4 * slot + 1] = old[i + 1];
      slots[4 * slot + 2] = old[i + 2];
    }
    this.slots = slots;
    this.mask = mask;
  }
}

function emptySlots(capacity: number): Int32Array {
  const slots = new Int32Array(capacity * 4);
  for (let i = 2; i < slots.length; i += 4) slots[i] = ABSENT;
  return slots;
}

/** Home slot of (a, b): both lanes folded, so keys that share one lane still spread. */
function slotOf(a: number, b: number, mask: number): number {
  return (a ^ Math.imul(b, 0x9e3779b1) ^ (b >>> 16)) & mask;
}
