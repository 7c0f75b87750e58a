import { describe, expect, it } from 'vitest';
import { comparePolicies, type PolicyResult } from '../../src/bench/policies.js';
import { traceFile } from '../support/sweep-fixture.js';

/**
 * Two conversations interleaved with a third: each comes back one turn later
 * with its previous prompt as prefix, after enough other traffic that a
 * 16-block GPU pool has lost it. At tokenScale 64 a trace block is 8 tokens;
 * requests arrive 4 steps apart and finish in 2, so they never overlap.
 */
const CONVERSATIONS = [
  { timestamp: 0, input_length: 2048, output_length: 128, hash_ids: [1, 2, 3, 4] },
  { timestamp: 4000, input_length: 2048, output_length: 128, hash_ids: [5, 6, 7, 8] },
  { timestamp: 8000, input_length: 2048, output_length: 128, hash_ids: [9, 10, 11, 12] },
  { timestamp: 12000, input_length: 2560, output_length: 128, hash_ids: [1, 2, 3, 4, 13] },
  { timestamp: 16000, input_length: 2560, output_length: 128, hash_ids: [5, 6, 7, 8, 14] },
];

/** The same conversations arriving three and two at once, with long answers: they preempt each other in the 16-block pool. */
const CROWDED = CONVERSATIONS.map((record, i) => ({ ...record, timestamp: i < 3 ? 0 : 4000, output_length: 1024 }));

describe('comparePolicies', () => {
  it("counts a preempted request's reads of its own blocks as rereads: hits stay what reuse across requests gave", async () => {
    const comparison = await comparePolicies({
      traceFile: traceFile(CROWDED),
      maxRequests: 10,
      tokenScale: 64,
      gpuBlocks: 16,
      cpuBlocks: 64,
      blockSize: 4,
      offloadFactor: 1,
      maxNumBatchedTokens: 8,
      configurations: [{ eviction: 'lru', storePolicy: 'on-compute' }],
    });
    const [gpuOnly, lru] = comparison.results;
    for (const result of comparison.results) {
      expect(result.verifiedRequests, result.label).toBe(5);
      expect(result.preemptions, result.label).toBeGreaterThan(0);
      expect(result.gpuPrefixHitTokens + result.cpuHitTokens + result.prefillTokensComputed, result.label).toBe(
        result.promptTokens + result.recomputedTokens,
      );
    }
    // Without a CPU tier the preempted requests read their own blocks back from the GPU or compute them again.
    expect(gpuOnly.gpuPrefixRereadTokens).toBeGreaterThan(0);
    expect(gpuOnly.recomputedTokens).toBeGreaterThan(0);
    // With it, the CPU tier serves them too, as rereads; its hits are the two returning conversations' 32-token prefixes.
    expect(lru.cpuRereadTokens).toBeGreaterThan(0);
    expect(lru.cpuHitTokens).toBe(64);
  });

  it('replays a trace through each configuration and reports its hits, prefill, stores and evictions', async () => {
    const comparison = await comparePolicies({
      traceFile: traceFile(CONVERSATIONS),
      maxRequests: 10,
      tokenScale: 64,
      gpuBlocks: 16,
      cpuBlocks: 64,
      blockSize: 4,
      offloadFactor: 1,
      configurations: [
        { eviction: 'lru', storePolicy: 'on-compute' },
        { eviction: 'arc', storePolicy: 'on-compute' },
        { eviction: 'lru', storePolicy: 'reuse:2' },
        { eviction: 'lru', storePolicy: 'on-evict' },
      ],
    });
    const byLabel = new Map<string, PolicyResult>(comparison.results.map((r) => [r.label, r]));
    expect([...byLabel.keys()]).toEqual(['GPU only', 'lru + on-compute', 'arc + on-compute', 'lru + reuse:2', 'lru + on-evict']);
    for (const result of comparison.results) {
      expect(result.requests).toBe(5);
      expect(result.promptTokens).toBe(3 * 32 + 2 * 40);
      expect(result.verifiedRequests).toBe(5);
      // Requests never overlap, so nothing is preempted and every prompt token is computed once or served by a tier.
      expect(result.preemptions).toBe(0);
      expect(result.prefillTokensComputed + result.gpuPrefixHitTokens + result.cpuHitTokens).toBe(result.promptTokens);
    }

    const gpuOnly = byLabel.get('GPU only') as PolicyResult;
    expect(gpuOnly.cpuHitTokens).toBe(0);
    expect(gpuOnly.storeJobs).toBe(0);
    // Both returning conversations find their previous prompt (32 tokens) in the tier.
    for (const label of ['lru + on-compute', 'arc + on-compute', 'lru + on-evict']) {
      const result = byLabel.get(label) as PolicyResult;
      expect(result.cpuHitTokens, label).toBe(64);
      expect(result.prefillTokensComputed, label).toBe(gpuOnly.prefillTokensComputed - 64);
      expect(result.blocksStored, label).toBeGreaterThan(0);
    }
    // Write-back stores only what the GPU evicted (once: a block reloaded and evicted again is held already).
    const writeBack = byLabel.get('lru + on-evict') as PolicyResult;
    expect(writeBack.blocksStored).toBeGreaterThan(0);
    expect(writeBack.blocksStored).toBeLessThanOrEqual(writeBack.gpuEvictions);
    // reuse:2: each prefix was looked up once before it came back, so none was stored in time.
    const reuse = byLabel.get('lru + reuse:2') as PolicyResult;
    expect(reuse.cpuHitTokens).toBe(0);
    expect(reuse.declinedOffers).toBeGreaterThan(0);
  });

  it('refuses a GPU pool too small for the longest request of the slice', async () => {
    await expect(
      comparePolicies({
        traceFile: traceFile(CONVERSATIONS),
        maxRequests: 10,
        tokenScale: 64,
        gpuBlocks: 8,
        cpuBlocks: 64,
        blockSize: 4,
        offloadFactor: 1,
        configurations: [],
      }),
    ).rejects.toThrow(/gpuBlocks 8 cannot hold the slice's longest request \(42 tokens/);
  });
});
