import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { ForwardingManager } from '../../../src/offload/forwarding-manager.js';
import { lruManager } from '../../../src/offload/lru-manager.js';
import type { OffloadingManager } from '../../../src/offload/manager.js';
import { ReuseFilterManager } from '../../../src/offload/reuse-filter-manager.js';
import { CpuTierTrackingManager } from '../../../src/remote/tracking-manager.js';

/** A queue-protecting LRU tier of two blocks, full with `a` and `b` (a the oldest). */
function fullProtectingTier(): OffloadingManager {
  const tier = lruManager({ capacityBlocks: 2, protectQueued: true });
  for (const key of ['a', 'b'] as BlockHash[]) {
    tier.prepareStore([key]);
    tier.completeStore([key], true);
  }
  return tier;
}

const WRAPPERS: readonly [string, (inner: OffloadingManager) => OffloadingManager][] = [
  ['the plain forwarding manager', (inner) => new ForwardingManager(inner)],
  ['the remote tier tracker', (inner) => new CpuTierTrackingManager(inner)],
  ['the reuse filter', (inner) => new ReuseFilterManager(inner, { threshold: 1, maxTrackerSize: 16 })],
];

describe.each(WRAPPERS)('%s', (_name, wrap) => {
  it("passes a queued request's protection through to the tier it wraps", () => {
    const manager = wrap(fullProtectingTier());
    manager.lookup(['c' as BlockHash]); // the reuse filter stores only keys it has seen
    manager.protect?.('queued', ['a' as BlockHash]);
    const out = manager.prepareStore(['c' as BlockHash]);
    // LRU would take `a`; the queued request's block stays and `b` goes.
    expect(out?.evictedKeys).toEqual(['b']);
    manager.release?.('queued');
    expect(manager.lookup(['a' as BlockHash])).toBe(1);
  });

  it('says whether the tier it wraps protects queued blocks, so the connector builds keys only then', () => {
    expect(wrap(fullProtectingTier()).protectsQueued).toBe(true);
    expect(wrap(lruManager({ capacityBlocks: 2 })).protectsQueued).toBe(false);
  });
});
