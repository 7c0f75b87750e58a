import { describe, expect, it } from 'vitest';
import { Harness, promptOf, SeededTierConnector } from './helpers.js';

describe('rank loss', () => {
  it('sends running and loading requests back to waiting and recomputes them to the same outputs', async () => {
    const h = new Harness({ connector: (ranks) => new SeededTierConnector(ranks), loadLatencySteps: 3 });
    const tier = h.connector as SeededTierConnector;
    tier.seed(promptOf(8, 50));
    h.add('a', { prompt: promptOf(10, 1), maxTokens: 6 });
    h.add('b', { prompt: promptOf(7, 2), maxTokens: 6 });
    await h.step();
    await h.step();
    h.add('loading', { prompt: [...promptOf(8, 50), 1], maxTokens: 3 });
    await h.step();
    expect(h.scheduler.getRequest('loading')!.status).toBe('waitingForCpuTierLoad');
    const returnedBefore = h.outputs.get('a')!.slice();
    expect(returnedBefore).toHaveLength(3);

    await h.loseRanks();
    for (const id of ['a', 'b', 'loading']) {
      const request = h.scheduler.getRequest(id)!;
      expect([request.status, request.numComputedTokens]).toEqual(['waiting', 0]);
    }
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(h.scheduler.waitingIds()).toEqual(['a', 'b', 'loading']);

    const { scheduled } = await h.step();
    expect(scheduled.preemptedReqIds).toEqual(['a', 'b']);
    expect(scheduled.requests.every((r) => r.blockIds !== null)).toBe(true);
    await h.runUntilIdle();
    expect(h.outputs.get('a')!.slice(0, 3)).toEqual(returnedBefore);
    for (const id of ['a', 'b', 'loading']) expect(h.outputs.get(id)).toEqual(h.expectedTokens(id));
    expect(h.scheduler.stats().rankResets).toBe(1);
    expect(h.scheduler.kvCacheManager.pool.checkConsistency()).toEqual([]);
  });
});
