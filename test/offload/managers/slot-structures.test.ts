import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { ABSENT } from '../../../src/core/lane-hash-table.js';
import { GhostKeys } from '../../../src/offload/ghost-keys.js';
import type { TierSlots } from '../../../src/offload/manager.js';
import { RememberedParents } from '../../../src/offload/remembered-parents.js';
import { NO_SLOT, SlotFifo } from '../../../src/offload/slot-fifo.js';
import { SlotPrefixTree } from '../../../src/offload/slot-prefix-tree.js';
import { keys } from './helpers.js';

/**
 * The typed-array structures S3-FIFO keeps its order in: queues and a prefix
 * tree over CPU block ids, and keys no longer held (ghosts, remembered parents).
 */

function fifoOrder(fifo: SlotFifo): number[] {
  const out: number[] = [];
  for (let slot = fifo.oldest; slot !== NO_SLOT; slot = fifo.after(slot)) out.push(slot);
  return out;
}

/** A tier whose block n is held at CPU block id n (key `kn`), for the blocks `held` lists. */
class FakeTier implements TierSlots {
  readonly held = new Set<number>();

  hold(...ns: number[]): this {
    for (const n of ns) this.held.add(n);
    return this;
  }

  idOf(key: BlockHash): number {
    const n = Number(key.slice(1));
    return this.held.has(n) ? n : ABSENT;
  }

  keyOf(id: number): BlockHash {
    return `k${id}`;
  }

  /** The ids of a chain's keys, as the manager hands them to a policy. */
  idsOf(chain: readonly BlockHash[]): Int32Array {
    return Int32Array.from(chain, (key) => this.idOf(key));
  }
}

function sawChain(tree: SlotPrefixTree, tier: FakeTier, ...ns: number[]): void {
  const chain = keys(...ns);
  tree.sawChain(chain, tier.idsOf(chain));
}

function orphans(tree: SlotPrefixTree): number[] {
  const out: number[] = [];
  for (let id = tree.oldestOrphan; id !== NO_SLOT; id = tree.orphanAfter(id)) out.push(id);
  return out;
}

describe('SlotFifo', () => {
  it('keeps slots oldest first through removals anywhere and growth', () => {
    const fifo = new SlotFifo(4);
    for (const slot of [2, 0, 3, 1]) fifo.push(slot);
    fifo.remove(3);
    fifo.remove(2);
    fifo.grow(8);
    fifo.push(7);
    fifo.push(2);
    expect(fifoOrder(fifo)).toEqual([0, 1, 7, 2]);
    expect(fifo.size).toBe(4);
  });

  it('moves a run of slots to the newest end in one piece, from the oldest end, the middle or the end', () => {
    const fifo = new SlotFifo(6);
    for (const slot of [0, 1, 2, 3, 4, 5]) fifo.push(slot);
    fifo.moveRunToNewest(0, 1);
    expect(fifoOrder(fifo)).toEqual([2, 3, 4, 5, 0, 1]);
    fifo.moveRunToNewest(4, 4);
    expect(fifoOrder(fifo)).toEqual([2, 3, 5, 0, 1, 4]);
    fifo.moveRunToNewest(1, 4);
    expect(fifoOrder(fifo)).toEqual([2, 3, 5, 0, 1, 4]);
    // Still a sound list: removing and pushing work as before.
    fifo.remove(2);
    fifo.push(2);
    expect(fifoOrder(fifo)).toEqual([3, 5, 0, 1, 4, 2]);
    expect(fifo.size).toBe(6);
  });

  it('walks from the newest slot back to the oldest', () => {
    const fifo = new SlotFifo(4);
    for (const slot of [2, 0, 3, 1]) fifo.push(slot);
    fifo.remove(3);
    const newestFirst: number[] = [];
    for (let slot = fifo.newest; slot !== NO_SLOT; slot = fifo.before(slot)) newestFirst.push(slot);
    expect(newestFirst).toEqual([1, 0, 2]);
  });
});

describe('GhostKeys', () => {
  it('forgets the oldest key once it holds its capacity, and a forgotten one frees room', () => {
    const ghosts = new GhostKeys(3);
    for (const key of keys(1, 2, 3, 4)) ghosts.add(key);
    expect(ghosts.list()).toEqual(keys(2, 3, 4));
    expect(ghosts.delete('k3')).toBe(true);
    expect(ghosts.delete('k1')).toBe(false);
    ghosts.add('k5');
    expect(ghosts.list()).toEqual(keys(2, 4, 5));
  });

  it('remembers more keys than it allocates up front, up to its capacity', () => {
    const capacity = 10_000;
    const ghosts = new GhostKeys(capacity);
    for (let n = 0; n < 25_000; n++) ghosts.add(`k${n}`);
    expect(ghosts.size).toBe(capacity);
    expect(ghosts.list()[0]).toBe('k15000');
    expect(ghosts.delete('k24999')).toBe(true);
    expect(ghosts.delete('k14999')).toBe(false);
  });
});

describe('RememberedParents', () => {
  it('keeps the first parent seen for a key until newer keys push it out', () => {
    const parents = new RememberedParents(2);
    parents.add('k2', 'k1');
    expect(parents.get('k2')).toBe('k1');
    parents.add('k3', 'k2');
    parents.add('k4', 'k3');
    expect(parents.get('k2')).toBeUndefined();
    expect(parents.get('k4')).toBe('k3');
    expect(parents.size).toBe(2);
  });

  it('finds every remembered parent, and none for other keys, while the ring fills past its first sizes and wraps', () => {
    const capacity = 20_000;
    const parents = new RememberedParents(capacity);
    const total = capacity + 5_000;
    for (let n = 1; n <= total; n++) {
      parents.add(`k${n}`, `k${n - 1}`);
      // Checked at every doubling of the ring and once it wrapped: the oldest keys forgotten, the rest all found.
      if ((n & (n - 1)) !== 0 && n !== total) continue;
      const oldest = Math.max(1, n - capacity + 1);
      for (let m = oldest; m <= n; m++) expect(parents.get(`k${m}`), `parent of k${m} after ${n} keys`).toBe(`k${m - 1}`);
      for (let m = 1; m < oldest; m++) expect(parents.get(`k${m}`)).toBeUndefined();
      expect(parents.get(`k${n + 1}`)).toBeUndefined();
    }
  });
});

describe('SlotPrefixTree', () => {
  it('links held blocks by the parents lookups showed, orphans children of a removed parent and re-adopts them', () => {
    const tier = new FakeTier().hold(1, 2, 3);
    const tree = new SlotPrefixTree(8, 16, tier);
    sawChain(tree, tier, 1, 2, 3);
    expect(tree.deepestUnder(1, () => true, 10)).toBe(3);
    tier.held.delete(1);
    tree.removed(1);
    expect(orphans(tree)).toEqual([2]);
    tier.hold(1);
    tree.added('k1', 1);
    expect(orphans(tree)).toEqual([]);
    expect(tree.deepestUnder(1, () => true, 10)).toBe(3);
  });

  it('links a block stored after its lookup under its held parent', () => {
    const tier = new FakeTier().hold(1);
    const tree = new SlotPrefixTree(8, 16, tier);
    sawChain(tree, tier, 1, 2);
    tier.hold(2);
    tree.added('k2', 2);
    expect(tree.deepestUnder(1, () => true, 10)).toBe(2);
  });

  it('walks down the first child that qualifies, in the order children were linked', () => {
    const tier = new FakeTier().hold(1, 2, 3, 4);
    const tree = new SlotPrefixTree(8, 16, tier);
    sawChain(tree, tier, 1, 3);
    sawChain(tree, tier, 1, 2, 4);
    expect(tree.deepestUnder(1, () => true, 10)).toBe(3);
    expect(tree.deepestUnder(1, (id) => id !== 3, 10)).toBe(4);
  });

  it('forgets a parent after enough newer keys, so a block stored later stays unlinked', () => {
    const tier = new FakeTier().hold(1);
    const tree = new SlotPrefixTree(8, 2, tier);
    sawChain(tree, tier, 1, 2);
    sawChain(tree, tier, 5, 6, 7);
    tier.hold(2);
    tree.added('k2', 2);
    expect(tree.deepestUnder(1, () => true, 10)).toBe(1);
  });

  it('never loops on a cycle of keys a malformed lookup showed', () => {
    const tier = new FakeTier().hold(1, 2);
    const tree = new SlotPrefixTree(8, 16, tier);
    sawChain(tree, tier, 1, 2);
    sawChain(tree, tier, 2, 1);
    expect([1, 2]).toContain(tree.deepestUnder(1, () => true, 5));
  });
});
