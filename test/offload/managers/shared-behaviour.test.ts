import { describe, expect, it } from 'vitest';
import { OffloadingManagerError } from '../../../src/offload/manager.js';
import { MANAGER_KINDS, extendChain, keys, loadable, prepareStore, storeEachReady, storeReady } from './helpers.js';

describe.each(MANAGER_KINDS)('$name manager', ({ create }) => {
  describe('lookups and loads', () => {
    it('counts the consecutive ready blocks from the start of the keys', () => {
      const manager = create(4);
      storeReady(manager, 1, 2);
      prepareStore(manager, 3);
      expect(manager.lookup(keys(1, 2, 3))).toBe(2);
      expect(manager.lookup(keys(1, 3, 2))).toBe(1);
      expect(manager.lookup(keys(9, 1))).toBe(0);
      expect(manager.lookup([])).toBe(0);
    });

    it('gives the CPU block ids of a load in the order of its keys and pins them', () => {
      const manager = create(4);
      storeReady(manager, 1, 2, 3);
      expect(manager.prepareLoad(keys(3, 1))).toEqual([2, 0]);
      expect(manager.stats().pinnedBlocks).toBe(2);
      manager.completeLoad(keys(3, 1));
      expect(manager.stats().pinnedBlocks).toBe(0);
    });

    it('refuses to load a block it does not hold or is still storing, naming the key and pinning nothing', () => {
      const manager = create(4);
      storeReady(manager, 1);
      prepareStore(manager, 2);
      expect(() => manager.prepareLoad(keys(1, 9))).toThrowError(/key k9 is not held/);
      expect(() => manager.prepareLoad(keys(1, 2))).toThrowError(/key k2 is still being stored/);
      expect(() => manager.prepareLoad(keys(2))).toThrowError(OffloadingManagerError);
      expect(manager.stats().pinnedBlocks).toBe(0);
    });

    it('refuses to complete a load that was not prepared, changing nothing', () => {
      const manager = create(4);
      storeReady(manager, 1, 2);
      manager.prepareLoad(keys(1));
      expect(() => manager.completeLoad(keys(2))).toThrowError(/key k2 has 0 loads in flight, cannot complete 1/);
      expect(() => manager.completeLoad(keys(1, 1))).toThrowError(/key k1 has 1 loads in flight, cannot complete 2/);
      expect(() => manager.completeLoad(keys(7))).toThrowError(/key k7 is not held/);
      expect(manager.stats().pinnedBlocks).toBe(1);
      manager.completeLoad(keys(1));
      expect(manager.stats().pinnedBlocks).toBe(0);
    });

    it('keeps a block pinned until every load of it completed', () => {
      const manager = create(1);
      storeReady(manager, 1);
      manager.prepareLoad(keys(1));
      manager.prepareLoad(keys(1));
      manager.completeLoad(keys(1));
      expect(manager.prepareStore(keys(2))).toBeNull();
      manager.completeLoad(keys(1));
      expect(prepareStore(manager, 2).evictedKeys).toEqual(keys(1));
    });
  });

  describe('stores and eviction', () => {
    it('evicts the oldest ready block first and reuses its CPU block', () => {
      const manager = create(3);
      storeEachReady(manager, 1, 2, 3);
      const out = prepareStore(manager, 4);
      expect(out.evictedKeys).toEqual(keys(1));
      expect(out.cpuBlockIds).toEqual([0]);
      expect(loadable(manager, 1, 2, 3, 4)).toEqual([2, 3]);
    });

    it('never evicts a block being stored or being loaded', () => {
      const manager = create(2);
      prepareStore(manager, 1);
      storeReady(manager, 2);
      manager.prepareLoad(keys(2));
      expect(manager.prepareStore(keys(3))).toBeNull();
      manager.completeLoad(keys(2));
      expect(prepareStore(manager, 3).evictedKeys).toEqual(keys(2));
      expect(manager.prepareStore(keys(4))).toBeNull();
    });

    it('answers null and changes nothing when too few blocks can be evicted, then stores once room exists', () => {
      const manager = create(3);
      storeReady(manager, 1);
      prepareStore(manager, 2, 3);
      const before = manager.stats();

      // One block is evictable but two are needed: not even that one goes.
      expect(manager.prepareStore(keys(4, 5))).toBeNull();
      expect(manager.stats()).toEqual({ ...before, storesRejected: before.storesRejected + 1 });
      expect(loadable(manager, 1, 2, 3, 4, 5)).toEqual([1]);

      manager.completeStore(keys(2, 3), true);
      const out = prepareStore(manager, 4, 5);
      expect(out.keysToStore).toEqual(keys(4, 5));
      expect(out.evictedKeys).toEqual(keys(1, 2));
    });

    it('answers null for more new keys than the whole tier holds', () => {
      const manager = create(2);
      expect(manager.prepareStore(keys(1, 2, 3))).toBeNull();
      expect(manager.stats().usedBlocks).toBe(0);
    });

    it('does not evict keys of the store itself that are already held to make room for the rest', () => {
      const manager = create(4);
      storeReady(manager, 1, 2);
      manager.touch(keys(1));
      const out = prepareStore(manager, 2, 3, 4, 5);
      expect(out.keysToStore).toEqual(keys(3, 4, 5));
      expect(out.cpuBlockIds).toEqual([2, 3, 0]);
      expect(out.evictedKeys).toEqual(keys(1));
    });

    it('skips keys already held, ready or still being stored, and counts a repeated key once', () => {
      const manager = create(4);
      storeReady(manager, 1);
      prepareStore(manager, 2);
      const out = prepareStore(manager, 1, 2, 3, 3);
      expect(out.keysToStore).toEqual(keys(3));
      expect(out.cpuBlockIds).toEqual([2]);
    });

    it('answers an empty output, not null, when every key is already held, even with no room', () => {
      const manager = create(1);
      prepareStore(manager, 1);
      expect(manager.prepareStore(keys(1))).toEqual({
        keysToStore: [],
        cpuBlockIds: [],
        evictedKeys: [],
        declinedKeys: [],
      });
    });

    it('hands out fresh CPU blocks first, then the most recently freed ones', () => {
      const manager = create(4);
      expect(storeReady(manager, 1, 2, 3, 4).cpuBlockIds).toEqual([0, 1, 2, 3]);
      const out = prepareStore(manager, 5, 6, 7);
      expect(out.evictedKeys).toEqual(keys(1, 2, 3));
      expect(out.cpuBlockIds).toEqual([2, 1, 0]);
    });

    it('stores only the absent keys an admission accepts and reports the ones it declined', () => {
      const manager = create(4);
      storeReady(manager, 1);
      const out = manager.prepareStore(keys(1, 2, 3, 4), (key) => key !== 'k3');
      expect(out?.keysToStore).toEqual(keys(2, 4));
      expect(out?.declinedKeys).toEqual(keys(3));
      expect(manager.stats().storesDeclined).toBe(1);
    });
  });

  describe('refreshing a chain', () => {
    it('evicts a refreshed chain from its tail, so what stays is still a prefix of it', () => {
      const manager = create(6);
      storeReady(manager, 1, 2, 3, 4, 5, 6);
      manager.refresh(keys(1, 2, 3, 4, 5, 6), 0, 6);
      for (let round = 0; round < 5; round++) {
        expect(prepareStore(manager, 10 + round).evictedKeys).toEqual(keys(6 - round));
        manager.completeStore(keys(10 + round), true);
        expect(manager.lookup(keys(1, 2, 3, 4, 5, 6))).toBe(5 - round);
      }
    });

    it('evicts a chain that later stores extended from its newest block back to its first', () => {
      const manager = create(5);
      extendChain(manager, [], [1, 2, 3], [4], [5]);
      for (let round = 0; round < 4; round++) {
        expect(prepareStore(manager, 10 + round).evictedKeys).toEqual(keys(5 - round));
        manager.completeStore(keys(10 + round), true);
      }
      expect(loadable(manager, 1, 2, 3, 4, 5)).toEqual([1]);
    });

    it('refuses offered keys outside the keys given, naming the range', () => {
      const manager = create(2);
      expect(() => manager.refresh(keys(1, 2), 1, 3)).toThrowError(/refresh: offered keys \[1, 3\) are not within the 2 keys given/);
      expect(() => manager.refresh(keys(1, 2), 2, 1)).toThrowError(OffloadingManagerError);
      expect(() => manager.refresh(keys(1, 2), -1, 1)).toThrowError(OffloadingManagerError);
    });
  });

  describe('completing stores', () => {
    it('makes stored blocks loadable only once their store completed', () => {
      const manager = create(2);
      const out = prepareStore(manager, 1, 2);
      expect(manager.lookup(keys(1, 2))).toBe(0);
      manager.completeStore(out.keysToStore, true);
      expect(manager.lookup(keys(1, 2))).toBe(2);
    });

    it('frees only the blocks a failed store was writing and keeps the evictions it caused', () => {
      const manager = create(3);
      storeEachReady(manager, 1, 2);
      const out = prepareStore(manager, 2, 3, 4);
      expect(out.evictedKeys).toEqual(keys(1));
      manager.completeStore(keys(2, 3, 4), false);
      expect(loadable(manager, 1, 2, 3, 4)).toEqual([2]);
      expect(manager.stats()).toMatchObject({ usedBlocks: 1, beingStoredBlocks: 0, storesFailed: 2 });
      // The two freed blocks are free again: storing two more evicts nothing.
      expect(prepareStore(manager, 5, 6).evictedKeys).toEqual([]);
    });

    it('leaves ready blocks untouched and ignores unknown keys when completing a store', () => {
      const manager = create(3);
      storeReady(manager, 1);
      manager.prepareLoad(keys(1));
      manager.completeStore(keys(1, 9), false);
      manager.completeStore(keys(1, 9), true);
      expect(manager.stats()).toMatchObject({ usedBlocks: 1, readyBlocks: 1, pinnedBlocks: 1, storesFailed: 0 });
      expect(loadable(manager, 1, 9)).toEqual([1]);
    });
  });

  describe('reset', () => {
    it('forgets every block and hands out ids from 0 again', () => {
      const manager = create(3);
      storeReady(manager, 1, 2);
      manager.prepareLoad(keys(1));
      prepareStore(manager, 3);

      manager.reset();
      expect(manager.stats()).toMatchObject({ usedBlocks: 0, readyBlocks: 0, beingStoredBlocks: 0, pinnedBlocks: 0 });
      expect(loadable(manager, 1, 2, 3)).toEqual([]);
      expect(prepareStore(manager, 4, 5, 6).cpuBlockIds).toEqual([0, 1, 2]);
    });
  });

  describe('stats', () => {
    it('count blocks per state and the hits, stores and evictions so far', () => {
      const manager = create(3);
      storeReady(manager, 1, 2);
      manager.prepareLoad(keys(2));
      prepareStore(manager, 3);
      manager.lookup(keys(1, 2, 3));
      manager.lookup(keys(2));
      expect(manager.stats()).toEqual({
        capacityBlocks: 3,
        usedBlocks: 3,
        readyBlocks: 2,
        beingStoredBlocks: 1,
        pinnedBlocks: 1,
        lookupHitBlocks: 3,
        storesAccepted: 3,
        storesCompleted: 2,
        storesFailed: 0,
        storesDeclined: 0,
        storesRejected: 0,
        evictions: 0,
      });
      manager.completeStore(keys(3), true);
      prepareStore(manager, 4);
      expect(manager.stats()).toMatchObject({ evictions: 1, storesAccepted: 4, storesCompleted: 3 });
    });
  });
});

describe.each(MANAGER_KINDS.filter((kind) => kind.byRecency))('$name manager (an order by recency)', ({ create }) => {
  it('after a touch, evicts untouched blocks first and leaves the first touched key for last', () => {
    const manager = create(3);
    storeEachReady(manager, 1, 2, 3);
    manager.touch(keys(1, 2));
    expect(prepareStore(manager, 4, 5, 6).evictedKeys).toEqual(keys(3, 2, 1));
  });

  it('ignores unknown keys in a touch', () => {
    const manager = create(2);
    storeEachReady(manager, 1, 2);
    manager.touch(keys(8, 1, 9));
    expect(prepareStore(manager, 3).evictedKeys).toEqual(keys(2));
  });

  it('reads only the chain up to the given end and ignores keys it does not hold', () => {
    const manager = create(3);
    storeReady(manager, 1, 2, 3);
    // Key 9 is not held; key 3 lies past the end and is not part of the chain.
    manager.refresh(keys(1, 9, 2, 3), 0, 3);
    expect(prepareStore(manager, 4).evictedKeys).toEqual(keys(3));
  });

  it('keeps a refreshed chain newer than blocks stored before its refresh', () => {
    const manager = create(3);
    storeReady(manager, 1, 2);
    storeReady(manager, 3);
    manager.refresh(keys(1, 2), 1, 2);
    expect(prepareStore(manager, 4, 5).evictedKeys).toEqual(keys(3, 2));
  });
});
