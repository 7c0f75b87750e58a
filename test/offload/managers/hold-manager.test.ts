import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { HoldOffloadingManager } from '../../../src/offload/hold-manager.js';
import { lruManager } from '../../../src/offload/lru-manager.js';
import type { OffloadingManager } from '../../../src/offload/manager.js';
import { admit, offer, promptKeys } from './helpers.js';

/**
 * The hold policy over a workload whose turns are continued only after far
 * more traffic than the tier holds: it learns that distance, holds what it
 * admitted that long and passes the rest by, where LRU keeps only the
 * newest blocks and so none that is continued.
 */

const CAPACITY = 64;
const TURN_BLOCKS = 4;
/** Turns stored between a turn and its continuation: TURN_BLOCKS x this blocks of traffic, far past CAPACITY. */
const CONTINUED_AFTER = 400;

/** Keys of one turn's prompt. */
function prompt(name: string, n = TURN_BLOCKS): BlockHash[] {
  return promptKeys(name, n);
}

/**
 * Turns t0, t1, ... each stored when it is computed, and each continued
 * (its prompt looked up again) CONTINUED_AFTER turns later: the hits of
 * those continuations.
 */
function conversations(manager: OffloadingManager, turns: number): number {
  let hits = 0;
  for (let t = 0; t < turns; t++) {
    admit(manager, prompt(`t${t}`));
    offer(manager, prompt(`t${t}`));
    if (t >= CONTINUED_AFTER) hits += admit(manager, prompt(`t${t - CONTINUED_AFTER}`));
  }
  return hits;
}

/** Offers `turn` again and again between one-off prompts, as a store policy retries, until the tier takes it. */
function storeBetweenOneOffs(manager: OffloadingManager, turn: readonly BlockHash[], tag: string): void {
  for (let n = 0; !offer(manager, turn); n++) {
    expect(n, 'the turn was never stored').toBeLessThan(100_000);
    offer(manager, prompt(`${tag}${n}`, 1));
  }
}

/** A burst of `n` one-off prompts of one block each, none ever read again. */
function oneOffBurst(manager: OffloadingManager, n: number, tag: string): void {
  for (let i = 0; i < n; i++) {
    admit(manager, prompt(`${tag}${i}`, 1));
    offer(manager, prompt(`${tag}${i}`, 1));
  }
}

describe('hold manager', () => {
  it('learns that turns come back far past its capacity and hits continuations that LRU never does', () => {
    const hold = new HoldOffloadingManager({ capacityBlocks: CAPACITY });
    const lru = lruManager({ capacityBlocks: CAPACITY });
    const turns = 3 * CONTINUED_AFTER;
    expect(conversations(lru, turns)).toBe(0);
    expect(conversations(hold, turns)).toBeGreaterThan(0);
    // It holds new blocks for about the distance it saw (TURN_BLOCKS x CONTINUED_AFTER), not the capacity.
    expect(hold.holdState().holdTime).toBeGreaterThan(TURN_BLOCKS * CONTINUED_AFTER);
  });

  it('keeps a recent turn through a burst of one-off prompts that flushes LRU', () => {
    const hold = new HoldOffloadingManager({ capacityBlocks: CAPACITY });
    const lru = lruManager({ capacityBlocks: CAPACITY });
    for (const manager of [hold, lru]) {
      conversations(manager, 2 * CONTINUED_AFTER);
      storeBetweenOneOffs(manager, prompt('recent'), 'wait');
      oneOffBurst(manager, 4 * CAPACITY, 'burst');
    }
    expect(admit(lru, prompt('recent'))).toBe(0);
    expect(admit(hold, prompt('recent'))).toBe(TURN_BLOCKS);
    // The burst was passed by rather than let in at the turn's expense.
    expect(hold.stats().storesRejected).toBeGreaterThan(0);
  });

  it('keeps every store like FIFO while it has seen no reuse, new blocks before reused ones', () => {
    const manager = new HoldOffloadingManager({ capacityBlocks: 4 });
    for (const n of [1, 2, 3, 4]) offer(manager, [`k${n}`]);
    admit(manager, ['k2']);
    expect(manager.prepareStore(['k5'])?.evictedKeys).toEqual(['k1']);
    expect(manager.holdState()).toEqual({ probation: ['k3', 'k4', 'k5'], kept: ['k2'], holdTime: 0 });
  });

  it('never passes by a store that brings back a block a lookup just missed', () => {
    const manager = new HoldOffloadingManager({ capacityBlocks: CAPACITY });
    conversations(manager, 2 * CONTINUED_AFTER);
    // A one-off offered and refused, then looked up (a continuation found it gone), then computed again.
    const missed = prompt('missed', 1);
    storeBetweenOneOffs(manager, prompt('fill'), 'fill');
    for (let n = 0; offer(manager, prompt(`young${n}`, 1)); n++) expect(n).toBeLessThan(CAPACITY);
    expect(offer(manager, missed)).toBe(false);
    expect(admit(manager, missed)).toBe(0);
    expect(offer(manager, missed)).toBe(true);
    expect(manager.holdState().kept).toContain(missed[0]);
  });
});
