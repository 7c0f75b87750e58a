import { describe, expect, it } from 'vitest';
import { classHoldManager } from '../../../src/offload/class-hold-manager.js';
import { HoldOffloadingManager } from '../../../src/offload/hold-manager.js';
import { lruManager } from '../../../src/offload/lru-manager.js';
import type { OffloadingManager } from '../../../src/offload/manager.js';
import { s3FifoManager } from '../../../src/offload/s3fifo-manager.js';
import { keys, loadable, storeEachReady } from './helpers.js';

/** Blocks of the tier that queued requests will read are kept over blocks nobody queued asked for. */

const KEEPING_KINDS = [
  { name: 'lru+queue', create: (capacityBlocks: number) => lruManager({ capacityBlocks, protectQueued: true }) },
  { name: 's3fifo+queue', create: (capacityBlocks: number) => s3FifoManager({ capacityBlocks, protectQueued: true }) },
  { name: 'hold+queue', create: (capacityBlocks: number) => new HoldOffloadingManager({ capacityBlocks, protectQueued: true }) },
  { name: 'classhold+queue', create: (capacityBlocks: number) => classHoldManager({ capacityBlocks, protectQueued: true }) },
];

/** `owner` joins the back of the queue (or with `front` its head) and will read blocks `ns`. */
function queue(manager: OffloadingManager, owner: string, ns: number[], front = false): void {
  manager.protect?.(owner, keys(...ns), front);
}

describe.each(KEEPING_KINDS)('$name', ({ create }) => {
  it('evicts blocks nobody queued asked for before a block a queued request will read, however old', () => {
    const manager = create(3);
    storeEachReady(manager, 1, 2, 3);
    queue(manager, 'r1', [1]);
    storeEachReady(manager, 4, 5);
    expect(loadable(manager, 1, 2, 3, 4, 5)).toEqual([1, 4, 5]);
  });

  it('refuses a store rather than evict for it a block that a request nearer the head of the queue will read', () => {
    const manager = create(2);
    storeEachReady(manager, 1, 2);
    queue(manager, 'a', [1]);
    queue(manager, 'b', [2]);
    // Nobody queued asked for block 3, and the request behind both asked for block 4.
    expect(manager.prepareStore(keys(3))).toBeNull();
    queue(manager, 'c', [4]);
    expect(manager.prepareStore(keys(4))).toBeNull();
    // A preempted request resumes at the head: room is made for what it reads.
    queue(manager, 'preempted', [5], true);
    expect(manager.prepareStore(keys(5))?.evictedKeys).toHaveLength(1);
    expect(manager.stats().storesRejected).toBe(2);
  });

  it('lets a block go normally once the requests that will read it were admitted', () => {
    const manager = create(2);
    storeEachReady(manager, 1, 2);
    queue(manager, 'a', [1, 2]);
    queue(manager, 'b', [2]);
    manager.release?.('a');
    storeEachReady(manager, 3);
    expect(loadable(manager, 1, 2, 3)).toEqual([2, 3]);
    manager.release?.('b');
    storeEachReady(manager, 4);
    expect(loadable(manager, 2, 3, 4)).toHaveLength(2);
    expect(loadable(manager, 4)).toEqual([4]);
  });
});

it('a manager not built to keep queued requests\' blocks ignores what they would read', () => {
  const manager = lruManager({ capacityBlocks: 2 });
  storeEachReady(manager, 1, 2);
  queue(manager, 'a', [1]);
  storeEachReady(manager, 3);
  expect(loadable(manager, 1, 2, 3)).toEqual([2, 3]);
});
