import { describe, expect, it } from 'vitest';
import type { LoadFaultInjector } from '../../src/sim/simulated-ranks.js';
import type { SchedulerStats } from '../../src/scheduler/scheduler-stats.js';
import { Harness, promptOf, SeededTierConnector } from './helpers.js';

/**
 * Hits counted once, when served (src/scheduler/token-ledger.ts), in the
 * scheduler over simulated ranks: 4-token blocks, a tier seeded with
 * reference KV.
 */

/** Fails the blocks at `indices` of every load issued for request `reqId`. */
function failLoadOf(reqId: string, indices: number[]): LoadFaultInjector {
  return (job) => (job.reqId === reqId ? indices.map((i) => job.gpuBlockIds[i]) : []);
}

function tierHarness(options: { loadFaults?: LoadFaultInjector; numGpuBlocks?: number } = {}) {
  const h = new Harness({
    config: options.numGpuBlocks === undefined ? {} : { numGpuBlocks: options.numGpuBlocks, maxModelLen: options.numGpuBlocks * 4 },
    connector: (ranks) => new SeededTierConnector(ranks),
    loadFaults: options.loadFaults,
  });
  return { h, tier: h.connector as SeededTierConnector };
}

function expectIdentity(s: SchedulerStats, promptTokens: number): void {
  expect(s.promptTokensReached).toBe(promptTokens);
  expect(s.gpuPrefixHitTokens + s.cpuTierHitTokens + s.prefillTokensComputed).toBe(promptTokens + s.recomputedTokens);
}

function expectExact(h: Harness, ids: readonly string[]): void {
  for (const id of ids) expect(h.outputs.get(id), id).toEqual(h.expectedTokens(id));
}

/**
 * Request 'a' asks for a 12-token prefix the tier holds plus two new tokens,
 * with the loads of the blocks at `failedBlocks` failing; its outputs are
 * checked exact, and the scheduler's counts returned.
 */
async function servePrefixWithFailedLoads(failedBlocks: number[]): Promise<SchedulerStats> {
  const { h, tier } = tierHarness({ loadFaults: failLoadOf('a', failedBlocks) });
  const prefix = promptOf(12, 101);
  tier.seed(prefix);
  h.add('a', { prompt: [...prefix, 1, 2], maxTokens: 3 });
  await h.runUntilIdle();
  expectExact(h, ['a']);
  return h.scheduler.stats();
}

describe('hit accounting', () => {
  it('counts the blocks a load served before its failed block as hits, and computes the rest once', async () => {
    const s = await servePrefixWithFailedLoads([1]);
    // Block 0 was served; block 1 failed, so blocks 1 and 2 and the last two tokens were computed, once.
    expect(s.cpuTierHitTokens).toBe(4);
    expect(s.prefillTokensComputed).toBe(10);
    expect(s.recomputedTokens).toBe(0);
    expectIdentity(s, 14);
  });

  it('with the whole load failing, counts no hit', async () => {
    const s = await servePrefixWithFailedLoads([0, 1, 2]);
    expect(s.cpuTierHitTokens).toBe(0);
    expect(s.cpuTierRereadTokens).toBe(0);
    expectIdentity(s, 14);
  });

  it('computes the last token of a block-aligned prompt the tier holds whole, and counts the others as hits', async () => {
    const { h, tier } = tierHarness();
    const prompt = promptOf(12, 101);
    tier.seed(prompt);
    h.add('a', { prompt, maxTokens: 3 });
    await h.runUntilIdle();
    expectExact(h, ['a']);
    const s = h.scheduler.stats();
    expect(s.cpuTierHitTokens).toBe(11);
    expect(s.prefillTokensComputed).toBe(1);
    expectIdentity(s, 12);
  });

  it("counts a preempted request's reads of its own blocks as rereads and what it computes again as recomputed", async () => {
    // 8 blocks of 4 tokens for two requests that grow to 6 blocks each: the later one is preempted.
    const { h } = tierHarness({ numGpuBlocks: 8 });
    h.add('a', { prompt: promptOf(12, 201), maxTokens: 12 });
    h.add('b', { prompt: promptOf(12, 202), maxTokens: 12 });
    await h.runUntilIdle();
    expectExact(h, ['a', 'b']);
    const s = h.scheduler.stats();
    expect(s.preemptions).toBeGreaterThan(0);
    // Nothing is shared between a and b: every token served or computed twice is a reread or a recomputation.
    expect(s.gpuPrefixHitTokens).toBe(0);
    expect(s.gpuPrefixRereadTokens + s.recomputedTokens).toBeGreaterThan(0);
    expectIdentity(s, 24);
  });
});
