/**
 * Histograms kept as plain counts: observing is a bucket search and three
 * additions, with no allocation, so the engine can record on its hot path
 * and a Prometheus registry reads the counts only when it is scraped.
 */

/**
 * Upper bounds (seconds) for request and step latencies: from 100 us (a
 * decode step on the host backend) to 60 s (a long request under load).
 */
export const LATENCY_BUCKETS_SECONDS: readonly number[] = Object.freeze([
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60,
]);

/**
 * Upper bounds (seconds) for transfer jobs: from 10 us (a few blocks copied
 * in host memory) to 10 s (a large load over a congested link).
 */
export const TRANSFER_BUCKETS_SECONDS: readonly number[] = Object.freeze([
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
]);

/**
 * Upper bounds (seconds) for cache-tier lookups, which take microseconds
 * (a few hash-map probes) and only reach milliseconds for very long prompts.
 */
export const LOOKUP_BUCKETS_SECONDS: readonly number[] = Object.freeze([
  0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1,
]);

/** Counts of observations per bucket; `counts[i]` holds values in (bounds[i-1], bounds[i]], the last slot those above every bound. */
export class Histogram {
  readonly bounds: readonly number[];
  /** Not cumulative: one slot per bound plus one for +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    for (let i = 1; i < bounds.length; i++) {
      if (!(bounds[i] > bounds[i - 1])) throw new RangeError(`histogram bounds must increase, got ${bounds[i - 1]} then ${bounds[i]}`);
    }
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    // Binary search for the first bound >= value (le semantics).
    let lo = 0;
    let hi = bounds.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (bounds[mid] < value) lo = mid + 1;
      else hi = mid;
    }
    this.counts[lo] += 1;
    this.sum += value;
    this.count += 1;
  }

  /** Convenience for the engine's millisecond clock. */
  observeMs(ms: number): void {
    this.observe(ms / 1000);
  }
}
