import type { BlockHash } from '../core/block-hash.js';

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
 */
export class OfferHistory {
  /** Offer time of each remembered key, in offer order; ~time once its first lookup was reported. */
  private readonly offeredAt = new Map<BlockHash, number>();
  private clock = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`capacity must be an integer >= 1, got ${String(capacity)}`);
    }
  }

  /** Distinct blocks offered so far. */
  get now(): number {
    return this.clock;
  }

  /** `key` was offered: a key not remembered starts its history now. */
  offered(key: BlockHash): void {
    if (this.offeredAt.has(key)) return;
    if (this.offeredAt.size === this.capacity) this.offeredAt.delete(this.offeredAt.keys().next().value as BlockHash);
    this.offeredAt.set(key, this.clock++);
  }

  /** Blocks of traffic since `key` was offered, or -1 when it is not remembered. */
  age(key: BlockHash): number {
    const at = this.offeredAt.get(key);
    if (at === undefined) return -1;
    return this.clock - (at < 0 ? ~at : at);
  }

  /**
   * `key` was looked up: its distance from the offer the first time after
   * that offer, else -1 (not remembered, or reported already).
   */
  firstLookup(key: BlockHash): number {
    const at = this.offeredAt.get(key);
    if (at === undefined || at < 0) return -1;
    this.offeredAt.set(key, ~at);
    return this.clock - at;
  }

  clear(): void {
    this.offeredAt.clear();
    this.clock = 0;
  }
}
