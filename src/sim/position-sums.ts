import { positionSum } from '../model/reference.js';
import type { ModelShape } from '../model/shape.js';

/**
 * Memoized positionSum over all heads (tp = 1). A position's KV sum depends
 * only on its chain state, so caching it by state changes nothing about what
 * the digest reads; it only saves recomputing the same sums every decode step.
 */
export class PositionSums {
  private readonly shape: ModelShape;
  private readonly cache = new Map<number, number>();
  private readonly maxEntries: number;

  constructor(shape: ModelShape, maxEntries = 1 << 20) {
    this.shape = shape;
    this.maxEntries = maxEntries;
  }

  /** The model these sums are for (a runner checks it matches its own). */
  get modelShape(): ModelShape {
    return this.shape;
  }

  of(chainState: number): number {
    let sum = this.cache.get(chainState);
    if (sum === undefined) {
      sum = positionSum(this.shape, chainState, 0, this.shape.kvHeads);
      if (this.cache.size >= this.maxEntries) this.cache.clear();
      this.cache.set(chainState, sum);
    }
    return sum;
  }
}
