import { describe, expect, it } from 'vitest';
import { lruManager } from '../../../src/offload/lru-manager.js';
import { keys, prepareStore, storeEachReady, storeReady } from './helpers.js';

function lru(capacityBlocks: number): ReturnType<typeof lruManager> {
  return lruManager({ capacityBlocks });
}

describe('LRU manager', () => {
  it('orders blocks by last use: new blocks are the newest, a touch moves its keys to the newest end', () => {
    const manager = lru(5);
    storeEachReady(manager, 1, 2, 3, 4);
    manager.touch(keys(2, 1));
    expect(manager.policy.keysOldestFirst()).toEqual(keys(3, 4, 1, 2));
    prepareStore(manager, 5);
    expect(manager.policy.keysOldestFirst()).toEqual(keys(3, 4, 1, 2, 5));
  });

  it('moves a refreshed chain to the newest end, its first block newest, whether it lies in pieces or in one run', () => {
    const manager = lru(6);
    storeEachReady(manager, 1, 2, 3, 4, 5, 6);
    manager.refresh(keys(2, 4, 5, 1), 0, 4);
    expect(manager.policy.keysOldestFirst()).toEqual(keys(3, 6, 1, 5, 4, 2));
    // Refreshed again, extended by block 6 and with an unknown key: block 6 goes just behind the rest.
    manager.refresh(keys(2, 4, 9, 5, 1, 6), 5, 6);
    expect(manager.policy.keysOldestFirst()).toEqual(keys(3, 6, 1, 5, 4, 2));
    manager.touch(keys(3));
    manager.refresh(keys(2, 4, 5, 1, 6), 4, 5);
    expect(manager.policy.keysOldestFirst()).toEqual(keys(3, 6, 1, 5, 4, 2));
  });

  it('refreshes a block still being stored on touch, without making it evictable', () => {
    const manager = lru(2);
    prepareStore(manager, 1);
    storeReady(manager, 2);
    manager.touch(keys(1));
    expect(manager.policy.keysOldestFirst()).toEqual(keys(2, 1));
    expect(prepareStore(manager, 3).evictedKeys).toEqual(keys(2));
  });

  it('runs a whole life cycle of stores, loads, touches, evictions and a failed store', () => {
    const manager = lru(4);
    expect(prepareStore(manager, 1, 2, 3).cpuBlockIds).toEqual([0, 1, 2]);
    expect(manager.lookup(keys(1, 2, 3))).toBe(0);
    manager.completeStore(keys(1, 2, 3), true);

    // 4 takes the last fresh block; 5 needs one more and evicts the oldest, 1.
    const second = prepareStore(manager, 2, 3, 4, 5);
    expect(second).toMatchObject({ keysToStore: keys(4, 5), cpuBlockIds: [3, 0], evictedKeys: keys(1) });

    // Everything is being stored or loaded: no room.
    manager.prepareLoad(keys(2, 3));
    expect(manager.prepareStore(keys(6))).toBeNull();
    manager.completeLoad(keys(2, 3));
    manager.completeStore(keys(4, 5), true);

    const third = prepareStore(manager, 6, 7, 8);
    expect(third).toMatchObject({ keysToStore: keys(6, 7, 8), cpuBlockIds: [3, 2, 1], evictedKeys: keys(2, 3, 4) });
    manager.completeStore(keys(6, 7, 8), true);

    manager.touch(keys(5, 6, 7));
    expect(prepareStore(manager, 9).evictedKeys).toEqual(keys(8));
    manager.completeStore(keys(9), false);

    expect(manager.lookup(keys(5, 6, 7))).toBe(3);
    // 8 was evicted for 9, whose store failed.
    for (const gone of [1, 2, 3, 4, 8, 9]) expect(manager.lookup(keys(gone))).toBe(0);
    expect(manager.stats()).toMatchObject({ usedBlocks: 3, evictions: 5, storesFailed: 1 });
  });
});

describe('LRU order with keys that share their lanes', () => {
  it('keeps an upper- and a lower-case spelling of one hash as two blocks in use order', () => {
    const manager = lru(3);
    const lower = 'abcdef0123456789';
    const upper = 'ABCDEF0123456789';
    for (const key of [lower, upper, 'other-key']) manager.completeStore(manager.prepareStore([key])!.keysToStore, true);
    manager.touch([lower]);
    expect(manager.policy.keysOldestFirst()).toEqual([upper, 'other-key', lower]);
    expect(manager.prepareStore(['next-key'])!.evictedKeys).toEqual([upper]);
    expect(manager.policy.keysOldestFirst()).toEqual(['other-key', lower, 'next-key']);
  });
});
