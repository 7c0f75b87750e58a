import { describe, expect, it } from 'vitest';
import { ReuseFilterManager } from '../../src/offload/reuse-filter-manager.js';
import { OffloadHarness, offloadedKeysOf, promptOf } from './helpers.js';

describe('the reuse:K store policy', () => {
  it('stores only blocks looked up K times', () => {
    const h = new OffloadHarness({ storePolicy: 'reuse:2' });
    expect(h.manager).toBeInstanceOf(ReuseFilterManager);
    const prompt = promptOf(16, 1);
    const keys = offloadedKeysOf(prompt, 4, 1);

    // Seen once: declined, so nothing reaches the tier.
    h.serve('first', { prompt, maxTokens: 2 });
    expect(h.stores()).toEqual([]);
    expect(h.connector.metrics().storeBlocksDeclined).toBeGreaterThan(0);
    expect(h.manager.stats().usedBlocks).toBe(0);

    // Seen a second time (a CPU miss, so it computes): now it is stored.
    h.forgetGpuCache();
    h.serve('second', { prompt, maxTokens: 2, seed: 2 });
    expect(h.stores().map((s) => s.reqId)).toEqual(['second']);
    expect(h.manager.lookup(keys)).toBe(4);

    // The third time it comes from the tier.
    h.forgetGpuCache();
    h.serve('third', { prompt, maxTokens: 2, seed: 3 });
    expect(h.loads().map((l) => l.reqId)).toEqual(['third']);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });

  it('stores a block declined while its request runs once a later lookup makes it qualify', () => {
    const h = new OffloadHarness({ storePolicy: 'reuse:2' });
    const a = promptOf(8, 4);
    const b = promptOf(8, 5);
    const [a0, a1] = offloadedKeysOf(a, 4, 1);
    h.add('long', { prompt: [...a, ...b], maxTokens: 12 });
    h.step();
    h.step();
    expect(h.stores()).toEqual([]);

    // Same first 8 tokens: its GPU hit stops one block short (the last token is recomputed), so it
    // looks up a1 a second time; a0 is served by the GPU and never looked up again.
    h.add('peer', { prompt: a, maxTokens: 1 });
    h.runUntilIdle();
    expect(h.manager.lookup([a1])).toBe(1);
    expect(h.manager.lookup([a0])).toBe(0);
    expect(h.manager.stats().usedBlocks).toBe(1);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });
});
