import { positionSum } from '../model/reference.js';
import type { ModelShape } from '../model/shape.js';

/**
 * Memoized positionSum over a range of KV heads (all of them by default; a
 * tensor-parallel rank's shard otherwise). A position's KV sum depends only on
 * its chain state, so caching it by state changes nothing about what a digest
 * reads; it only saves recomputing the same sums every decode step.
 */
export class PositionSums {
  readonly firstHead: number;
  readonly headCount: number;
  private readonly shape: ModelShape;
  private readonly cache = new Map<number, number>();
  private readonly maxEntries: number;

  constructor(shape: ModelShape, options: { firstHead?: number; headCount?: number; maxEntries?: number } = {}) {
    this.shape = shape;
    this.firstHead = options.firstHead ?? 0;
    this.headCount = options.headCount ?? shape.kvHeads;
    this.maxEntries = options.maxEntries ?? 1 << 20;
  }

  /** The model these sums are for (a device checks it matches its own). */
  get modelShape(): ModelShape {
    return this.shape;
  }

  of(chainState: number): number {
    let sum = this.cache.get(chainState);
    if (sum === undefined) {
      sum = positionSum(this.shape, chainState, this.firstHead, this.headCount);
      if (this.cache.size >= this.maxEntries) this.cache.clear();
      this.cache.set(chainState, sum);
    }
    return sum;
  }
}
