import { describe, expect, it } from 'vitest';
import { Histogram, LATENCY_BUCKETS_SECONDS, LOOKUP_BUCKETS_SECONDS } from '../../src/metrics/histogram.js';
import { registerSnapshotHistogram } from '../../src/metrics/snapshot-histogram.js';
import { Registry } from 'prom-client';
import { Exposition } from '../support/exposition.js';

describe('Histogram', () => {
  it('puts a value equal to a bound in that bound\'s bucket (le), and values above every bound in +Inf', () => {
    const h = new Histogram([0.001, 0.01, 0.1]);
    for (const v of [0, 0.001, 0.0011, 0.01, 0.05, 0.1, 3]) h.observe(v);
    expect([...h.counts]).toEqual([2, 2, 2, 1]);
    expect(h.count).toBe(7);
    expect(h.sum).toBeCloseTo(3.1621, 10);
  });

  it('takes milliseconds from the engine clock and keeps seconds', () => {
    const h = new Histogram(LATENCY_BUCKETS_SECONDS);
    h.observeMs(250);
    expect(h.sum).toBe(0.25);
    expect(h.counts[LATENCY_BUCKETS_SECONDS.indexOf(0.25)]).toBe(1);
  });

  it('rejects bounds that do not increase', () => {
    expect(() => new Histogram([0.1, 0.1])).toThrow(/must increase/);
  });

  it('has buckets from sub-millisecond to tens of seconds for latencies, and microseconds for lookups', () => {
    expect(LATENCY_BUCKETS_SECONDS[0]).toBeLessThan(0.001);
    expect(LATENCY_BUCKETS_SECONDS.at(-1)).toBeGreaterThanOrEqual(10);
    expect(LOOKUP_BUCKETS_SECONDS[0]).toBeLessThanOrEqual(0.000001);
  });
});

describe('a snapshot histogram in a registry', () => {
  it('exposes cumulative buckets, sum and count per labelled series, read at scrape time', async () => {
    const registry = new Registry();
    const fast = new Histogram([0.01, 0.1]);
    const slow = new Histogram([0.01, 0.1]);
    registerSnapshotHistogram(registry, 'demo_seconds', 'demo', ['rank'], () => [
      { labels: { rank: '0' }, histogram: fast },
      { labels: { rank: '1' }, histogram: slow },
    ]);
    fast.observe(0.005);
    fast.observe(0.05);
    slow.observe(5);
    const e = new Exposition(await registry.metrics());
    expect(e.histogram('demo_seconds')).toEqual([
      { labels: { rank: '0' }, buckets: [[0.01, 1], [0.1, 2], [Infinity, 2]], sum: 0.055, count: 2 },
      { labels: { rank: '1' }, buckets: [[0.01, 0], [0.1, 0], [Infinity, 1]], sum: 5, count: 1 },
    ]);
    slow.observe(0.02);
    expect(new Exposition(await registry.metrics()).histogram('demo_seconds')[1].count).toBe(2);
  });
});
