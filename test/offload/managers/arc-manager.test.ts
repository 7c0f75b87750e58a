import { describe, expect, it } from 'vitest';
import { arcManager } from '../../../src/offload/arc-manager.js';
import { lruManager } from '../../../src/offload/lru-manager.js';
import { keys, loadable, prepareStore, storeEachReady, storeReady } from './helpers.js';

function arc(capacityBlocks: number): ReturnType<typeof arcManager> {
  return arcManager({ capacityBlocks });
}

/**
 * Capacity 2, leaving T1 = [k5], T2 = [k4], B1 = [k3], B2 = [k2, k1], p = 0:
 * blocks 1 and 2 were reused, then pushed out of T2; block 3 was not reused.
 */
function arcWithGhostsInBothLists(): ReturnType<typeof arcManager> {
  const manager = arc(2);
  storeEachReady(manager, 1, 2);
  manager.touch(keys(1, 2)); // T2 = [k2, k1]
  storeReady(manager, 3); // T1 is empty, so T2's oldest (k2) goes to B2
  storeReady(manager, 4); // |T1| = 1 >= p: k3 goes to B1
  manager.touch(keys(4)); // T2 = [k1, k4]
  storeReady(manager, 5); // T1 is empty again: k1 goes to B2
  expect(manager.policy.state()).toEqual({ targetT1Size: 0, t1: keys(5), t2: keys(4), b1: keys(3), b2: keys(2, 1) });
  return manager;
}

describe('ARC manager', () => {
  it('puts new blocks in T1, being stored or ready', () => {
    const manager = arc(4);
    storeReady(manager, 1);
    prepareStore(manager, 2);
    expect(manager.policy.state()).toEqual({ targetT1Size: 0, t1: keys(1, 2), t2: [], b1: [], b2: [] });
  });

  it('promotes a touched ready block from T1 to T2, the first touched key the most recent', () => {
    const manager = arc(4);
    storeReady(manager, 1, 2, 3);
    manager.touch(keys(1, 2));
    expect(manager.policy.state()).toMatchObject({ t1: keys(3), t2: keys(2, 1) });
  });

  it('promotes a block being loaded, which is ready, like any ready block', () => {
    const manager = arc(4);
    storeReady(manager, 1);
    manager.prepareLoad(keys(1));
    manager.touch(keys(1));
    expect(manager.policy.state()).toMatchObject({ t1: [], t2: keys(1) });
  });

  it('keeps a touched block that is still being stored in T1, moved to its newest end', () => {
    const manager = arc(4);
    prepareStore(manager, 1, 2);
    manager.touch(keys(1));
    expect(manager.policy.state()).toMatchObject({ t1: keys(2, 1), t2: [] });
  });

  it('moves a touched T2 block to the newest end of T2', () => {
    const manager = arc(4);
    storeReady(manager, 1, 2);
    manager.touch(keys(2, 1)); // T2 = [k1, k2]
    manager.touch(keys(1));
    expect(manager.policy.state()).toMatchObject({ t1: [], t2: keys(2, 1) });
  });

  it("moves a refreshed chain's blocks to the newest end of their own list, the first block newest, promoting none", () => {
    const manager = arc(6);
    storeReady(manager, 1, 2, 3, 4);
    manager.touch(keys(4)); // T2 = [k4]
    storeReady(manager, 5);
    manager.refresh(keys(1, 2, 4), 0, 3);
    expect(manager.policy.state()).toMatchObject({ t1: keys(3, 5, 2, 1), t2: keys(4) });
  });

  it('leaves the T1 target alone when a refreshed chain names ghosts', () => {
    const manager = arcWithGhostsInBothLists();
    manager.refresh(keys(3, 2, 1), 0, 3);
    expect(manager.policy.state()).toEqual({ targetT1Size: 0, t1: keys(5), t2: keys(4), b1: keys(3), b2: keys(2, 1) });
  });

  it('remembers a block evicted from T1 in B1 and one evicted from T2 in B2', () => {
    const manager = arc(2);
    storeEachReady(manager, 1, 2);
    manager.touch(keys(2));
    storeReady(manager, 3);
    expect(manager.policy.state()).toMatchObject({ t1: keys(3), t2: keys(2), b1: keys(1), b2: [] });
    manager.touch(keys(3));
    storeReady(manager, 4);
    expect(manager.policy.state()).toMatchObject({ t1: keys(4), t2: keys(3), b1: keys(1), b2: keys(2) });
  });

  it('raises the T1 target on a B1 ghost hit by max(1, |B2|/|B1|), up to the capacity', () => {
    const manager = arcWithGhostsInBothLists();
    manager.touch(keys(3)); // |B2| / |B1| = 2
    expect(manager.policy.state().targetT1Size).toBe(2);
    manager.touch(keys(3));
    expect(manager.policy.state().targetT1Size).toBe(2);
  });

  it('raises the T1 target by at least one when B1 holds more ghosts than B2', () => {
    const manager = arc(2);
    storeEachReady(manager, 1, 2, 3); // k1 goes to B1
    manager.touch(keys(1)); // |B2| / |B1| = 0
    expect(manager.policy.state().targetT1Size).toBe(1);
  });

  it('lowers the T1 target on a B2 ghost hit by max(1, |B1|/|B2|), never below 0', () => {
    const manager = arcWithGhostsInBothLists();
    manager.touch(keys(3));
    manager.touch(keys(2)); // |B1| / |B2| = 0.5, so the step is 1
    expect(manager.policy.state().targetT1Size).toBe(1);
    manager.touch(keys(1));
    manager.touch(keys(1));
    expect(manager.policy.state().targetT1Size).toBe(0);
  });

  it('evicts from T1 while |T1| >= floor(p) and from T2 once T1 is below its target', () => {
    const atTarget = arcWithGhostsInBothLists(); // p = 0, |T1| = 1
    expect(prepareStore(atTarget, 6).evictedKeys).toEqual(keys(5));

    const belowTarget = arcWithGhostsInBothLists();
    belowTarget.touch(keys(3)); // p = 2 > |T1| = 1
    expect(prepareStore(belowTarget, 6).evictedKeys).toEqual(keys(4));
    expect(belowTarget.policy.state()).toMatchObject({ t1: keys(5, 6), t2: [], b2: keys(2, 1, 4).slice(-2) });
  });

  it('weighs T1 against its target again after each block of a multi-block eviction', () => {
    const manager = arc(3);
    storeEachReady(manager, 1, 2, 3);
    manager.touch(keys(3)); // T1 = [k1, k2], T2 = [k3]
    storeReady(manager, 4); // k1 goes to B1
    manager.touch(keys(1, 1)); // p = 2
    expect(manager.policy.state()).toMatchObject({ targetT1Size: 2, t1: keys(2, 4), t2: keys(3) });
    // |T1| = 2 >= 2: T1's oldest first; then |T1| = 1 < 2: T2's oldest.
    expect(prepareStore(manager, 5, 6).evictedKeys).toEqual(keys(2, 3));
  });

  it('falls back to the other list when the preferred one has nothing evictable', () => {
    const manager = arcWithGhostsInBothLists();
    manager.touch(keys(3)); // p = 2: T2 is preferred
    manager.prepareLoad(keys(4)); // ...but its only block is pinned
    expect(prepareStore(manager, 6).evictedKeys).toEqual(keys(5));
    manager.completeLoad(keys(4));
  });

  it('refuses a store needing two evictions when only one block is evictable, keeping T1, T2 and the ghosts as they were', () => {
    const manager = arcWithGhostsInBothLists();
    manager.prepareLoad(keys(4));
    const before = manager.policy.state();
    expect(manager.prepareStore(keys(6, 7))).toBeNull();
    expect(manager.policy.state()).toEqual(before);
    expect(loadable(manager, 4, 5)).toEqual([4, 5]);
  });

  it('keeps each ghost list to at most the capacity, dropping the oldest ghosts', () => {
    const manager = arc(2);
    for (let n = 1; n <= 6; n++) storeReady(manager, n);
    expect(manager.policy.state()).toMatchObject({ t1: keys(5, 6), b1: keys(3, 4) });

    const reused = arc(2);
    for (let n = 1; n <= 8; n++) {
      storeReady(reused, n);
      reused.touch(keys(n));
    }
    expect(reused.policy.state()).toMatchObject({ t1: [], t2: keys(7, 8), b2: keys(5, 6) });
  });

  it('takes a key out of the ghost lists when it is stored again', () => {
    const manager = arcWithGhostsInBothLists();
    storeReady(manager, 3, 1); // evicts k5 to B1 and k4 to B2 first
    expect(manager.policy.state()).toMatchObject({ t1: keys(3, 1), t2: [], b1: keys(5), b2: keys(4) });
  });

  it('keeps reused blocks through a scan of one-time blocks that flushes them out of an LRU tier', () => {
    const scan = [10, 11, 12, 13, 14, 15, 16, 17];
    const arcManager = arc(3);
    const lru = lruManager({ capacityBlocks: 3 });
    for (const manager of [arcManager, lru]) {
      storeEachReady(manager, 1, 2);
      manager.touch(keys(1, 2));
      storeEachReady(manager, ...scan);
    }
    expect(loadable(arcManager, 1, 2)).toEqual([1, 2]);
    expect(loadable(lru, 1, 2)).toEqual([]);
  });

  it('leaves no ghost of a block whose store failed, while the block it evicted stays in B1', () => {
    const manager = arc(1);
    storeReady(manager, 1);
    const out = prepareStore(manager, 2);
    expect(out.evictedKeys).toEqual(keys(1));
    manager.completeStore(out.keysToStore, false);
    expect(manager.policy.state()).toEqual({ targetT1Size: 0, t1: [], t2: [], b1: keys(1), b2: [] });
  });

  it('forgets its lists and target on reset', () => {
    const manager = arcWithGhostsInBothLists();
    manager.touch(keys(3));
    manager.reset();
    expect(manager.policy.state()).toEqual({ targetT1Size: 0, t1: [], t2: [], b1: [], b2: [] });
  });
});
