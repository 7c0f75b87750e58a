import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/core/errors.js';
import { lruManager } from '../../../src/offload/lru-manager.js';
import { ReuseFilterManager } from '../../../src/offload/reuse-filter-manager.js';
import { keys, prepareStore, storeReady } from './helpers.js';

interface FilterSetup {
  readonly backing: ReturnType<typeof lruManager>;
  readonly filter: ReuseFilterManager;
}

function reuseFilter(threshold: number, maxTrackerSize: number, capacityBlocks = 8): FilterSetup {
  const backing = lruManager({ capacityBlocks });
  return { backing, filter: new ReuseFilterManager(backing, { threshold, maxTrackerSize }) };
}

/** `times` lookups of the given blocks, as `times` requests with that prefix would make. */
function seen(filter: ReuseFilterManager, times: number, ...ns: number[]): void {
  for (let i = 0; i < times; i++) filter.lookup(keys(...ns));
}

describe('reuse filter manager', () => {
  it('stores a block once lookups saw it threshold times and declines the others', () => {
    const { filter } = reuseFilter(2, 16);
    seen(filter, 2, 1, 2);
    seen(filter, 1, 3);
    const out = filter.prepareStore(keys(1, 2, 3, 4));
    expect(out?.keysToStore).toEqual(keys(1, 2));
    expect(out?.declinedKeys).toEqual(keys(3, 4));
    expect(filter.stats().storesDeclined).toBe(2);
  });

  it('stores a declined block later, once it was seen often enough', () => {
    const { filter } = reuseFilter(3, 16);
    seen(filter, 2, 1);
    expect(filter.prepareStore(keys(1))?.keysToStore).toEqual([]);
    seen(filter, 1, 1);
    expect(filter.prepareStore(keys(1))?.keysToStore).toEqual(keys(1));
  });

  it('forgets the least recently seen key when the tracker is full, so its count starts again', () => {
    const { filter } = reuseFilter(2, 3);
    seen(filter, 1, 1);
    seen(filter, 1, 2, 3, 4); // the tracker holds 3 keys: k1 is pushed out
    expect(filter.sightingsOf('k1')).toBe(0);
    seen(filter, 1, 1); // counted once again, not twice
    expect(filter.sightingsOf('k1')).toBe(1);
    expect(filter.prepareStore(keys(1))?.keysToStore).toEqual([]);
  });

  it('keeps a recently seen key in the tracker ahead of older ones', () => {
    const { filter } = reuseFilter(2, 2);
    seen(filter, 1, 1, 2);
    seen(filter, 1, 1); // k1 is now the most recently seen: k2 goes first
    seen(filter, 1, 3);
    expect([filter.sightingsOf('k1'), filter.sightingsOf('k2'), filter.sightingsOf('k3')]).toEqual([2, 0, 1]);
  });

  it('protects a held block from eviction by a store listing it, even after its count was forgotten', () => {
    const { filter } = reuseFilter(2, 2, 2);
    seen(filter, 2, 1);
    storeReady(filter, 1);
    seen(filter, 2, 2);
    storeReady(filter, 2);
    seen(filter, 2, 3); // k1 leaves the tracker; it is also the oldest block held
    const out = filter.prepareStore(keys(1, 3));
    expect(out).toMatchObject({ keysToStore: keys(3), evictedKeys: keys(2), declinedKeys: [] });
  });

  it('combines its threshold with an admission the caller passes', () => {
    const { filter } = reuseFilter(1, 16);
    seen(filter, 1, 1, 2);
    const out = filter.prepareStore(keys(1, 2, 3), (key) => key !== 'k1');
    expect(out).toMatchObject({ keysToStore: keys(2), declinedKeys: keys(1, 3) });
  });

  it('answers lookups, loads, touches and stats from the manager it wraps', () => {
    const { backing, filter } = reuseFilter(1, 16, 2);
    seen(filter, 1, 1, 2);
    storeReady(filter, 1, 2);
    expect(filter.lookup(keys(1, 2, 3))).toBe(2);
    expect(filter.prepareLoad(keys(2))).toEqual([1]);
    expect(backing.stats().pinnedBlocks).toBe(1);
    filter.completeLoad(keys(2));
    filter.touch(keys(1));
    expect(backing.policy.keysOldestFirst()).toEqual(keys(2, 1));
    seen(filter, 1, 3);
    expect(prepareStore(filter, 3).evictedKeys).toEqual(keys(2));
    expect(filter.stats()).toEqual(backing.stats());
    expect(backing.lookup(keys(1))).toBe(1);
    expect(backing.lookup(keys(2))).toBe(0);
  });

  it('resets the tier it wraps but keeps counting sightings across the reset', () => {
    const { backing, filter } = reuseFilter(2, 16);
    seen(filter, 2, 1);
    storeReady(filter, 1);
    filter.reset();
    expect(backing.stats().usedBlocks).toBe(0);
    expect(filter.prepareStore(keys(1))?.keysToStore).toEqual(keys(1));
  });

  it('rejects a threshold or tracker size that is not a positive integer, naming it', () => {
    const backing = lruManager({ capacityBlocks: 1 });
    expect(() => new ReuseFilterManager(backing, { threshold: 0, maxTrackerSize: 4 })).toThrowError(
      /threshold must be an integer >= 1, got 0/,
    );
    expect(() => new ReuseFilterManager(backing, { threshold: 2, maxTrackerSize: 1.5 })).toThrowError(
      /maxTrackerSize must be an integer >= 1, got 1.5/,
    );
    expect(() => new ReuseFilterManager(backing, { threshold: 2, maxTrackerSize: 0 })).toThrowError(ConfigError);
  });
});
