import { describe, expect, it } from 'vitest';
import { hitDensityManager } from '../../../src/offload/hit-density-manager.js';
import { HoldOffloadingManager } from '../../../src/offload/hold-manager.js';
import { PrefixLinks } from '../../../src/offload/prefix-links.js';
import { lruManager } from '../../../src/offload/lru-manager.js';
import type { OffloadingManager } from '../../../src/offload/manager.js';
import { s3FifoManager } from '../../../src/offload/s3fifo-manager.js';
import { extendChain, keys, storeReady } from './helpers.js';

/**
 * The prefix tree both prefix-aware managers keep: a lookup of a prompt (its
 * keys first block first) tells them which block extends which.
 */

const PREFIX_AWARE = [
  { name: 'S3-FIFO', create: (capacityBlocks: number) => s3FifoManager({ capacityBlocks }) },
  { name: 'LHD', create: (capacityBlocks: number) => hitDensityManager({ capacityBlocks }) },
  { name: 'Hold', create: (capacityBlocks: number) => new HoldOffloadingManager({ capacityBlocks }) },
];

/** A prompt of blocks `ns` looked up (as the connector does at admission), then stored. */
function storePrompt(manager: OffloadingManager, ...ns: number[]): void {
  manager.touch(keys(...ns));
  storeReady(manager, ...ns);
}

describe.each(PREFIX_AWARE)('$name manager over the prefix tree', ({ create }) => {
  it('evicts the deepest blocks of a prompt first, never leaving a block without its parent', () => {
    const manager = create(6);
    storePrompt(manager, 1, 2, 3, 4, 5, 6);
    for (let round = 0; round < 5; round++) {
      const out = manager.prepareStore(keys(10 + round));
      expect(out?.evictedKeys).toEqual(keys(6 - round));
      manager.completeStore(keys(10 + round), true);
      // What is left of the prompt is still a prefix of it.
      expect(manager.lookup(keys(1, 2, 3, 4, 5, 6))).toBe(5 - round);
    }
  });

  it('links the blocks a request stored after its lookup, so no block of the chain goes before its descendants', () => {
    const manager = create(5);
    // Blocks 1-3 are the prompt the admission looked up; 4 and 5 were computed later, each stored by a decode step.
    extendChain(manager, [1, 2, 3], [1, 2, 3], [4], [5]);
    for (let round = 0; round < 4; round++) {
      expect(manager.prepareStore(keys(10 + round))?.evictedKeys).toEqual(keys(5 - round));
      manager.completeStore(keys(10 + round), true);
      expect(manager.lookup(keys(1, 2, 3, 4, 5))).toBe(4 - round);
    }
  });

  it('evicts a block whose parent is gone before anything else', () => {
    const manager = create(3);
    storePrompt(manager, 1, 2);
    storeReady(manager, 3);
    // With 2 and 3 pinned by loads, only block 1 can make room: its child 2 stays, orphaned.
    manager.prepareLoad(keys(2, 3));
    expect(manager.prepareStore(keys(4))?.evictedKeys).toEqual(keys(1));
    manager.completeStore(keys(4), true);
    manager.completeLoad(keys(2, 3));
    // Block 2 can never be hit without block 1: it goes before 3 and 4.
    expect(manager.prepareStore(keys(5))?.evictedKeys).toEqual(keys(2));
  });
});

describe('S3-FIFO manager', () => {
  it('keeps a prompt reused while new over a stream of one-time prompts', () => {
    const manager = s3FifoManager({ capacityBlocks: 20 });
    storePrompt(manager, 1, 2);
    manager.touch(keys(1, 2)); // reused while in the small FIFO: it moves to the main FIFO
    for (let n = 100; n < 160; n++) storePrompt(manager, n);
    expect(manager.lookup(keys(1, 2))).toBe(2);
    const state = manager.policy.state();
    expect(state.main).toEqual(expect.arrayContaining(keys(1, 2)));
  });

  it("counts no reuse when a request's store refreshes its chain: its blocks stay in the small FIFO", () => {
    const manager = s3FifoManager({ capacityBlocks: 20 });
    extendChain(manager, [], [1, 2], [3], [4]);
    expect(manager.policy.state()).toMatchObject({ small: keys(1, 2, 3, 4), main: [] });
  });

  it('stores a block that comes back while its ghost is remembered straight into the main FIFO', () => {
    const manager = s3FifoManager({ capacityBlocks: 10 });
    storePrompt(manager, 1);
    for (let n = 100; n < 120; n++) storePrompt(manager, n);
    expect(manager.policy.state().ghosts).toContain('k1');
    storePrompt(manager, 1);
    expect(manager.policy.state().main).toContain('k1');
    expect(manager.policy.state().ghosts).not.toContain('k1');
  });
});

describe('LHD manager', () => {
  /** Each prompt returns once, 6 capacities of other traffic later; the hits the tier had for them. */
  function lateReturns(manager: OffloadingManager, capacity: number): number {
    const gap = 6 * capacity;
    let hits = 0;
    for (let t = 0; t < 40 * capacity; t++) {
      if (t >= gap && t % 2 === 0) {
        const returning = keys(t - gap);
        hits += manager.lookup(returning) ?? 0;
        manager.touch(returning);
      }
      storePrompt(manager, t);
    }
    return hits;
  }

  it("counts no hit when a request's store refreshes its chain", () => {
    const manager = hitDensityManager({ capacityBlocks: 16 });
    const refreshed = hitDensityManager({ capacityBlocks: 16 });
    // The same stores; one manager also sees every chain refreshed. Densities come from hits and evictions only.
    for (let n = 0; n < 200; n += 4) {
      storePrompt(manager, n, n + 1, n + 2, n + 3);
      extendChain(refreshed, [n, n + 1, n + 2, n + 3], [n, n + 1], [n + 2], [n + 3]);
    }
    expect(refreshed.policy.state().densities).toEqual(manager.policy.state().densities);
  });

  it('learns that prompts come back late and keeps some of them where LRU keeps none', () => {
    const capacity = 64;
    expect(lateReturns(lruManager({ capacityBlocks: capacity }), capacity)).toBe(0);
    const lhd = hitDensityManager({ capacityBlocks: capacity });
    expect(lateReturns(lhd, capacity)).toBeGreaterThan(10);
    expect(lhd.policy.state().densities.some((d) => d > 0)).toBe(true);
  });
});

describe('PrefixLinks', () => {
  it('links held blocks by the parents lookups showed, orphans children of a removed parent and re-adopts them', () => {
    const held = new Set(keys(1, 2, 3));
    const links = new PrefixLinks(16, (key) => held.has(key));
    links.sawChain(keys(1, 2, 3));
    expect(links.linkCount()).toBe(2);
    expect(links.deepestUnder('k1', () => true, 10)).toBe('k3');
    held.delete('k1');
    links.removed('k1');
    expect([...links.orphanKeys()]).toEqual(keys(2));
    held.add('k1');
    links.added('k1');
    expect([...links.orphanKeys()]).toEqual([]);
    expect(links.linkCount()).toBe(2);
  });

  it('never loops on a cycle of keys a malformed lookup showed', () => {
    const links = new PrefixLinks(16, () => true);
    links.sawChain(keys(1, 2));
    links.sawChain(keys(2, 1));
    expect(['k1', 'k2']).toContain(links.deepestUnder('k1', () => true, 5));
  });
});
