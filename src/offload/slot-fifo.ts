/** What a SlotFifo answers past its ends. */
export const NO_SLOT = -1;

/**
 * A FIFO of slot numbers (0 .. capacity - 1, e.g. CPU block ids), each in at
 * most one place: an intrusive doubly-linked list in typed arrays, so pushing,
 * removing any slot and walking oldest first allocate nothing and cost no map
 * entry or object per slot. The owner knows which slots are in the queue
 * (`remove` of a slot that is not corrupts the list).
 */
export class SlotFifo {
  private prev: Int32Array;
  private next: Int32Array;
  private head = NO_SLOT;
  private tail = NO_SLOT;
  private count = 0;

  constructor(capacity: number) {
    this.prev = new Int32Array(capacity);
    this.next = new Int32Array(capacity);
  }

  /** Slots it can hold (0 .. capacity - 1). */
  get capacity(): number {
    return this.prev.length;
  }

  /** Makes room for slots up to `capacity` - 1, keeping the queue. */
  grow(capacity: number): void {
    if (capacity <= this.prev.length) return;
    const prev = new Int32Array(capacity);
    const next = new Int32Array(capacity);
    prev.set(this.prev);
    next.set(this.next);
    this.prev = prev;
    this.next = next;
  }

  get size(): number {
    return this.count;
  }

  /** The oldest slot, or NO_SLOT when empty. */
  get oldest(): number {
    return this.head;
  }

  /** The newest slot, or NO_SLOT when empty. */
  get newest(): number {
    return this.tail;
  }

  /** The slot before `slot` (older), or NO_SLOT. */
  before(slot: number): number {
    return this.prev[slot];
  }

  /** The slot after `slot` (newer), or NO_SLOT. */
  after(slot: number): number {
    return this.next[slot];
  }

  /** Appends `slot` as the newest; it must not be queued. */
  push(slot: number): void {
    this.prev[slot] = this.tail;
    this.next[slot] = NO_SLOT;
    if (this.tail === NO_SLOT) this.head = slot;
    else this.next[this.tail] = slot;
    this.tail = slot;
    this.count++;
  }

  /** Takes a queued `slot` out, wherever it is. */
  remove(slot: number): void {
    const prev = this.prev[slot];
    const next = this.next[slot];
    if (prev === NO_SLOT) this.head = next;
    else this.next[prev] = next;
    if (next === NO_SLOT) this.tail = prev;
    else this.prev[next] = prev;
    this.count--;
  }

  /**
   * Moves the run of queued slots from `first` to `last` (`last` reached from
   * `first` by `after`, or `first` itself) to the newest end, in its order.
   */
  moveRunToNewest(first: number, last: number): void {
    if (last === this.tail) return;
    const before = this.prev[first];
    const after = this.next[last];
    if (before === NO_SLOT) this.head = after;
    else this.next[before] = after;
    this.prev[after] = before;
    this.prev[first] = this.tail;
    this.next[this.tail] = first;
    this.next[last] = NO_SLOT;
    this.tail = last;
  }

  clear(): void {
    this.head = NO_SLOT;
    this.tail = NO_SLOT;
    this.count = 0;
  }
}
