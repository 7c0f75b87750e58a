/**
 * Percentiles by linear interpolation between the two nearest ranks (the
 * "linear" method of numpy): p50 of [1, 2, 3, 4] is 2.5.
 */
export function percentile(sorted: ArrayLike<number>, p: number): number | null {
  if (sorted.length === 0) return null;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile ${p}: expected 0..100`);
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.min(low + 1, sorted.length - 1);
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}

export interface Percentiles {
  readonly p50: number | null;
  readonly p90: number | null;
  readonly p99: number | null;
}

/** p50/p90/p99 of unsorted values (null when there are none). */
export function summarizePercentiles(values: readonly number[]): Percentiles {
  const sorted = Float64Array.from(values).sort();
  return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99) };
}
