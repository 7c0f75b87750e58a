import { describe, expect, it } from 'vitest';
import { OfferHistory } from '../../../src/offload/offer-history.js';
import { RecentKeys } from '../../../src/offload/recent-keys.js';
import { ReuseDistances } from '../../../src/offload/reuse-distances.js';

/** Observes `count` reuses at `distance`, the traffic so far being `now`. */
function observeMany(distances: ReuseDistances, count: number, distance: number, now: number): void {
  for (let i = 0; i < count; i++) distances.observe(distance, now);
}

describe('ReuseDistances', () => {
  it('chooses no hold before it has seen reuse', () => {
    expect(new ReuseDistances(100, 6400).holdTime).toBe(0);
  });

  it('holds blocks for longer than the tier keeps them when reuses come far past its capacity', () => {
    const distances = new ReuseDistances(100, 6400);
    observeMany(distances, 256, 2000, 10_000);
    expect(distances.holdTime).toBeGreaterThan(2000);
    expect(distances.holdTime).toBeLessThan(6400);
  });

  it('keeps everything it stores when reuses come within its capacity', () => {
    const distances = new ReuseDistances(1000, 6400);
    observeMany(distances, 256, 500, 10_000);
    observeMany(distances, 16, 3000, 10_000);
    expect(distances.holdTime).toBe(0);
  });

  it('judges no distance that the traffic so far could not have shown', () => {
    const distances = new ReuseDistances(100, 6400);
    // Only 150 blocks of traffic: nothing past the first bucket edge (100) could be judged.
    observeMany(distances, 256, 50, 150);
    expect(distances.holdTime).toBe(0);
  });

  it('tells the share of reuses that came later than an age, all of them before any was seen', () => {
    const distances = new ReuseDistances(100, 6400);
    expect(distances.shareLaterThan(0)).toBe(1);
    observeMany(distances, 30, 50, 10_000);
    observeMany(distances, 10, 3000, 10_000);
    expect(distances.shareLaterThan(1000)).toBeCloseTo(0.25);
    expect(distances.shareLaterThan(5000)).toBe(0);
  });

  it('rejects a capacity or horizon that is not a positive integer, naming it', () => {
    expect(() => new ReuseDistances(0, 6400)).toThrowError(/capacityBlocks must be an integer >= 1, got 0/);
    expect(() => new ReuseDistances(10, 10)).toThrowError(/horizon must be an integer >= 64, got 10/);
  });
});

describe('OfferHistory', () => {
  it('counts distinct offered keys as its clock: retries and offers of remembered keys do not move it', () => {
    const history = new OfferHistory(8);
    history.offered('a');
    history.offered('b');
    history.offered('a');
    expect(history.now).toBe(2);
    expect(history.age('a')).toBe(2);
    expect(history.age('c')).toBe(-1);
  });

  it('reports a key\'s first lookup after its offer once', () => {
    const history = new OfferHistory(8);
    history.offered('a');
    history.offered('b');
    history.offered('c');
    expect(history.firstLookup('a')).toBe(3);
    expect(history.firstLookup('a')).toBe(-1);
    expect(history.age('a')).toBe(3);
    expect(history.firstLookup('z')).toBe(-1);
  });

  it('forgets the oldest offer beyond its capacity', () => {
    const history = new OfferHistory(2);
    for (const key of ['a', 'b', 'c']) history.offered(key);
    expect(history.age('a')).toBe(-1);
    expect(history.age('b')).toBe(2);
  });
});

describe('RecentKeys', () => {
  it('forgets the key added longest ago beyond its capacity, a key added again counting as new', () => {
    const recent = new RecentKeys(2);
    recent.add('a');
    recent.add('b');
    recent.add('a');
    recent.add('c');
    expect([recent.has('a'), recent.has('b'), recent.has('c')]).toEqual([true, false, true]);
    expect(recent.delete('a')).toBe(true);
    expect(recent.delete('a')).toBe(false);
    expect(recent.size).toBe(1);
  });
});
