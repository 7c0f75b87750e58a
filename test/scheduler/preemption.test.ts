import { describe, expect, it } from 'vitest';
import { Harness, promptOf } from './helpers.js';

/** Three requests whose decodes outgrow a pool of 8 blocks of 4 tokens. */
function crowdedPool(): Harness {
  const h = new Harness({ config: { numGpuBlocks: 8, maxModelLen: 32 } });
  h.add('a', { prompt: promptOf(8, 1), maxTokens: 12, arrivalTime: 0 });
  h.add('b', { prompt: promptOf(8, 2), maxTokens: 12, arrivalTime: 1 });
  h.add('c', { prompt: promptOf(8, 3), maxTokens: 12, arrivalTime: 2 });
  return h;
}

describe('preemption', () => {
  it('preempts the latest arrival when blocks run out and puts it at the front of the queue', async () => {
    const h = crowdedPool();
    await h.step(); // all three prefill: 6 of 8 blocks
    h.add('late', { prompt: promptOf(3, 4), maxTokens: 2, arrivalTime: 3 });
    const { scheduled } = await h.step(); // each decode needs a third block: only two are free
    expect(scheduled.preemptedReqIds).toEqual(['c']);
    expect(scheduled.requests.map((r) => r.reqId)).toEqual(['a', 'b']);
    expect(h.scheduler.waitingIds()).toEqual(['c', 'late']);
    const c = h.scheduler.getRequest('c')!;
    expect([c.status, c.numComputedTokens, c.numPreemptions]).toEqual(['preempted', 0, 1]);
    expect(h.scheduler.stats().preemptions).toBe(1);
  });

  it('admits no waiting request in a step that preempted', async () => {
    const h = crowdedPool();
    await h.step();
    h.add('tiny', { prompt: [1], maxTokens: 1, arrivalTime: 3 });
    const { scheduled } = await h.step();
    expect(scheduled.preemptedReqIds).not.toHaveLength(0);
    expect(scheduled.requests.every((r) => r.blockIds === null)).toBe(true);
  });

  it('resumes a preempted request with a fresh full block table and reproduces the reference tokens', async () => {
    const h = crowdedPool();
    await h.runUntilIdle();
    const resumed = h.steps.find((s, i) => i > 1 && s.requests.some((r) => r.reqId === 'c' && r.blockIds !== null));
    expect(resumed).toBeDefined();
    for (const id of ['a', 'b', 'c']) expect(h.outputs.get(id)).toEqual(h.expectedTokens(id));
    expect(h.scheduler.stats().preemptions).toBeGreaterThanOrEqual(1);
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(h.scheduler.kvCacheManager.pool.checkConsistency()).toEqual([]);
  });

  it('picks the latest arrival, not the request added last', async () => {
    const h = new Harness({ config: { numGpuBlocks: 5, maxModelLen: 20 } });
    h.add('x', { prompt: promptOf(8, 1), maxTokens: 4, arrivalTime: 5 });
    h.add('y', { prompt: promptOf(8, 2), maxTokens: 4, arrivalTime: 1 });
    await h.step();
    expect(h.scheduler.runningIds()).toEqual(['y', 'x']);
    expect((await h.step()).scheduled.preemptedReqIds).toEqual(['x']);
    await h.runUntilIdle();
    expect(h.outputs.get('x')).toEqual(h.expectedTokens('x'));
    expect(h.outputs.get('y')).toEqual(h.expectedTokens('y'));
  });

  it('breaks an arrival tie by preempting the request added last', async () => {
    const h = new Harness({ config: { numGpuBlocks: 5, maxModelLen: 20 } });
    h.add('x', { prompt: promptOf(8, 1), maxTokens: 4, arrivalTime: 0 });
    h.add('y', { prompt: promptOf(8, 2), maxTokens: 4, arrivalTime: 0 });
    await h.step();
    expect((await h.step()).scheduled.preemptedReqIds).toEqual(['y']);
  });

  it('frees a later arrival for an earlier one that needs a block, and keeps scheduling the rest', async () => {
    const h = new Harness({ config: { numGpuBlocks: 6, maxModelLen: 24 } });
    h.add('a', { prompt: promptOf(8, 1), maxTokens: 4, arrivalTime: 0 }); // needs a third block at its first decode
    h.add('b', { prompt: promptOf(6, 2), maxTokens: 4, arrivalTime: 1 });
    h.add('c', { prompt: promptOf(6, 3), maxTokens: 4, arrivalTime: 2 });
    await h.step(); // 6 of 6 blocks
    const { scheduled } = await h.step();
    expect(scheduled.preemptedReqIds).toEqual(['c']);
    expect(scheduled.requests.map((r) => r.reqId)).toEqual(['a', 'b']);
    await h.runUntilIdle();
    for (const id of ['a', 'b', 'c']) expect(h.outputs.get(id)).toEqual(h.expectedTokens(id));
  });
});
