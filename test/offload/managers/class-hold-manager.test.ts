import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { classHoldManager } from '../../../src/offload/class-hold-manager.js';
import { HoldOffloadingManager } from '../../../src/offload/hold-manager.js';
import type { OffloadingManager } from '../../../src/offload/manager.js';
import { admit, offer, promptKeys } from './helpers.js';

/**
 * The class hold policy over a workload of two kinds of requests, both past
 * what the tier holds: long prompts, each continued far later, and short
 * one-off prompts, never read again. Hold keeps a share of whatever came;
 * class hold learns which kind comes back and keeps that one.
 */

const CAPACITY = 64;
const LONG_BLOCKS = 8;
const ONE_OFFS_PER_ROUND = 8;
/** Rounds between a long prompt and its continuation: far more traffic than CAPACITY, and than the reuse histogram's first bucket. */
const CONTINUED_AFTER = 100;

/** A request computed on the GPU: looked up, then its blocks offered. */
function compute(manager: OffloadingManager, keys: readonly BlockHash[]): void {
  admit(manager, keys);
  offer(manager, keys);
}

/**
 * Rounds of one long prompt and ONE_OFFS_PER_ROUND one-block prompts; each
 * long prompt is continued (looked up again) CONTINUED_AFTER rounds later.
 * Returns the blocks those continuations hit.
 */
function twoKinds(manager: OffloadingManager, rounds: number, tag = ''): number {
  let hits = 0;
  for (let r = 0; r < rounds; r++) {
    compute(manager, promptKeys(`${tag}long${r}`, LONG_BLOCKS));
    for (let i = 0; i < ONE_OFFS_PER_ROUND; i++) compute(manager, promptKeys(`${tag}once${r}.${i}`, 1));
    if (r >= CONTINUED_AFTER) hits += admit(manager, promptKeys(`${tag}long${r - CONTINUED_AFTER}`, LONG_BLOCKS));
  }
  return hits;
}

describe('class hold manager', () => {
  it('learns which kind of prompt comes back and hits more continuations than hold, which keeps a share of both', () => {
    const classHold = classHoldManager({ capacityBlocks: CAPACITY });
    const hold = new HoldOffloadingManager({ capacityBlocks: CAPACITY });
    const rounds = 6 * CONTINUED_AFTER;
    const holdHits = twoKinds(hold, rounds);
    const classHoldHits = twoKinds(classHold, rounds);
    expect(holdHits).toBeGreaterThan(0);
    expect(classHoldHits).toBeGreaterThan(1.5 * holdHits);
  });

  it('stores a prompt of the kind that comes back by evicting the newest one-offs, where hold passes it by', () => {
    const classHold = classHoldManager({ capacityBlocks: CAPACITY });
    const hold = new HoldOffloadingManager({ capacityBlocks: CAPACITY });
    for (const manager of [classHold, hold]) {
      twoKinds(manager, 3 * CONTINUED_AFTER);
      // The tier loses its blocks (not what it learned) and fills with one-offs until none is old enough to go.
      manager.reset();
      for (let n = 0; ; n++) {
        expect(n, 'the tier never filled').toBeLessThan(2 * CAPACITY);
        const oneOff = promptKeys(`young${n}`, 1);
        admit(manager, oneOff);
        if (!offer(manager, oneOff)) break;
      }
      admit(manager, promptKeys('new-long', LONG_BLOCKS));
    }
    expect(hold.prepareStore(promptKeys('new-long', LONG_BLOCKS))).toBeNull();
    const out = classHold.prepareStore(promptKeys('new-long', LONG_BLOCKS));
    expect(out?.keysToStore).toEqual(promptKeys('new-long', LONG_BLOCKS));
    // The one-offs stored last go, newest first.
    const newest = Array.from({ length: LONG_BLOCKS }, (_, i) => `young${CAPACITY - 1 - i}-0`);
    expect(out?.evictedKeys).toEqual(newest);
  });

  it('does not let a store of the least worthy kind take room from blocks of its own kind', () => {
    const classHold = classHoldManager({ capacityBlocks: CAPACITY });
    twoKinds(classHold, 3 * CONTINUED_AFTER);
    classHold.reset();
    // One-offs fill the tier until none is old enough to go; the next one-off is passed by, evicting nothing.
    let n = 0;
    for (; n < 2 * CAPACITY; n++) {
      const oneOff = promptKeys(`young${n}`, 1);
      admit(classHold, oneOff);
      if (!offer(classHold, oneOff)) break;
    }
    expect(n).toBeLessThan(2 * CAPACITY);
    const next = promptKeys('one-more', 1);
    admit(classHold, next);
    expect(classHold.prepareStore(next)).toBeNull();
  });
});
