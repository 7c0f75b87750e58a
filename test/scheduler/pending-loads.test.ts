import { describe, expect, it } from 'vitest';
import { Harness, promptOf, SeededTierConnector } from './helpers.js';

function tierHarness(options: { loadLatencySteps?: number; loadAsync?: boolean; maxNumSeqs?: number } = {}) {
  const h = new Harness({
    config: { maxNumSeqs: options.maxNumSeqs ?? 16 },
    connector: (ranks) => new SeededTierConnector(ranks, { loadAsync: options.loadAsync ?? true }),
    loadLatencySteps: options.loadLatencySteps ?? 2,
  });
  return { h, tier: h.connector as SeededTierConnector };
}

describe('loads from the CPU tier', () => {
  it('makes a request wait while its blocks load, then computes only what the tier did not hold', async () => {
    const { h, tier } = tierHarness();
    const prefix = promptOf(12, 1);
    tier.seed(prefix);
    h.add('a', { prompt: [...prefix, 5, 6], maxTokens: 3 });
    const first = (await h.step()).scheduled;
    expect(first.requests).toHaveLength(0);
    expect(first.offload?.loads.map((l) => l.reqId)).toEqual(['a']);
    expect(h.scheduler.getRequest('a')!.status).toBe('waitingForCpuTierLoad');
    await h.step();
    await h.step(); // the load lands (two steps of latency)
    const resumed = (await h.step()).scheduled.requests[0];
    expect([resumed.reqId, resumed.startPosition, resumed.tokens]).toEqual(['a', 12, [5, 6]]);
    await h.runUntilIdle();
    expect(h.outputs.get('a')).toEqual(h.expectedTokens('a'));
    expect(h.scheduler.stats().cpuTierHitTokens).toBe(12);
  });

  it('still computes the last prompt token when the tier holds the whole prompt', async () => {
    const { h, tier } = tierHarness({ loadLatencySteps: 0 });
    const prompt = promptOf(12, 2);
    tier.seed(prompt);
    h.add('a', { prompt, maxTokens: 2 });
    expect((await h.step()).scheduled.offload?.loads[0].gpuBlockIds).toHaveLength(3);
    const resumed = (await h.step()).scheduled.requests[0];
    expect([resumed.startPosition, resumed.tokens.length, resumed.sample]).toEqual([11, 1, true]);
    await h.runUntilIdle();
    expect(h.outputs.get('a')).toEqual(h.expectedTokens('a'));
  });

  it('runs a request in the same step as a synchronous load', async () => {
    const { h, tier } = tierHarness({ loadAsync: false });
    const prefix = promptOf(8, 3);
    tier.seed(prefix);
    h.add('a', { prompt: [...prefix, 1, 2, 3], maxTokens: 2 });
    const first = (await h.step()).scheduled;
    expect(first.offload?.loads).toHaveLength(1);
    expect(first.requests.map((r) => [r.reqId, r.startPosition])).toEqual([['a', 8]]);
    await h.runUntilIdle();
    expect(h.outputs.get('a')).toEqual(h.expectedTokens('a'));
  });

  it('lets a second request share an in-flight load: no second load, and it runs in the first step after the load lands', async () => {
    const { h, tier } = tierHarness({ loadLatencySteps: 2 });
    const prefix = promptOf(12, 4);
    tier.seed(prefix);
    h.add('first', { prompt: [...prefix, 5, 6], maxTokens: 3 });
    await h.step(); // step 0: first's load is issued
    h.add('second', { prompt: [...prefix, 7, 8, 9], maxTokens: 3 });
    await h.step(); // step 1: second hits first's blocks, still loading
    expect(tier.issuedLoads).toHaveLength(1);
    expect(h.scheduler.getRequest('second')!.status).toBe('waitingForCpuTierLoad');
    await h.step(); // step 2: the load lands
    expect(h.results[2].finishedJobs.map((j) => j.jobId)).toEqual([tier.issuedLoads[0].jobId]);
    const both = (await h.step()).scheduled; // step 3
    expect(both.requests.map((r) => [r.reqId, r.startPosition])).toEqual([
      ['first', 12],
      ['second', 12],
    ]);
    await h.runUntilIdle();
    expect(tier.issuedLoads).toHaveLength(1);
    expect(h.outputs.get('first')).toEqual(h.expectedTokens('first'));
    expect(h.outputs.get('second')).toEqual(h.expectedTokens('second'));
    expect(h.scheduler.stats()).toMatchObject({ cpuTierHitTokens: 12, gpuPrefixHitTokens: 12 });
  });

  it('counts requests waiting for KV toward maxNumSeqs', async () => {
    const { h, tier } = tierHarness({ loadLatencySteps: 3, maxNumSeqs: 2 });
    tier.seed(promptOf(8, 5));
    tier.seed(promptOf(8, 6));
    h.add('a', { prompt: [...promptOf(8, 5), 1], maxTokens: 2 });
    h.add('b', { prompt: [...promptOf(8, 6), 1], maxTokens: 2 });
    h.add('c', { prompt: promptOf(5, 7), maxTokens: 2 });
    const first = (await h.step()).scheduled;
    expect(first.requests).toHaveLength(0);
    expect(h.scheduler.stats()).toMatchObject({ waitingForCpuTierLoad: 2, waiting: 1 });
    while (h.scheduler.hasPendingWork()) {
      await h.step();
      const stats = h.scheduler.stats();
      expect(stats.running + stats.waitingForCpuTierLoad).toBeLessThanOrEqual(2);
    }
    const cFirst = h.steps.findIndex((s) => s.requests.some((r) => r.reqId === 'c'));
    const aDone = h.steps.findIndex((s) => s.finishedReqIds.includes('a'));
    expect(cFirst).toBeGreaterThanOrEqual(aDone);
    for (const id of ['a', 'b', 'c']) expect(h.outputs.get(id)).toEqual(h.expectedTokens(id));
  });
});
