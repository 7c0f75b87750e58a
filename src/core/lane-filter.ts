/** Counters per key a filter is sized for: few enough false positives to be worth its read. */
const COUNTERS_PER_KEY = 4;
const MIN_BITS = 12;
const MAX_BITS = 20;

/** The most keys a filter is sized for (1 MiB of counters): asking for more gives this size. */
export const LANE_FILTER_MAX_ROOM = (1 << MAX_BITS) / COUNTERS_PER_KEY;

/**
 * A counting filter over 64-bit keys given as two uint32 lanes: "certainly
 * absent" or "maybe present", from one byte per counter in a table small
 * enough to stay in cache, so a lookup that usually misses skips the probe
 * into a large hash table. Adding and removing a key moves its counter; a
 * counter that reaches 255 stays there (it only costs false positives).
 */
export class LaneFilter {
  private readonly counters: Uint8Array;
  private readonly shift: number;

  /** `expectedKeys`: about how many keys it holds at once (sets the table size, 4 counters per key, 4 KiB to 1 MiB). */
  constructor(expectedKeys: number) {
    let bits = MIN_BITS;
    while (bits < MAX_BITS && 1 << bits < COUNTERS_PER_KEY * expectedKeys) bits++;
    this.counters = new Uint8Array(1 << bits);
    this.shift = 32 - bits;
  }

  /**
   * Keys it is sized for (at least the expected keys, up to
   * LANE_FILTER_MAX_ROOM): an owner whose keys outgrow it may build a larger
   * one from its keys. A filter far larger than its keys is a random read
   * into memory the cache does not hold, on every lookup it answers.
   */
  get room(): number {
    return this.counters.length / COUNTERS_PER_KEY;
  }

  /** Whether an owner holding `keys` keys should build a larger filter: they exceed its room, and a larger one can be had. */
  outgrownBy(keys: number): boolean {
    const room = this.room;
    return keys > room && room < LANE_FILTER_MAX_ROOM;
  }

  add(a: number, b: number): void {
    const i = this.slot(a, b);
    if (this.counters[i] !== 255) this.counters[i]++;
  }

  /** Removes a key `add` added. */
  remove(a: number, b: number): void {
    const i = this.slot(a, b);
    if (this.counters[i] !== 255) this.counters[i]--;
  }

  /** False when no key with these lanes was added (and not removed). */
  mayHave(a: number, b: number): boolean {
    return this.counters[this.slot(a, b)] !== 0;
  }

  clear(): void {
    this.counters.fill(0);
  }

  private slot(a: number, b: number): number {
    return (Math.imul(a ^ Math.imul(b, 0x9e3779b1), 0x85ebca6b) >>> this.shift);
  }
}
