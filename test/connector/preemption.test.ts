import { describe, expect, it } from 'vitest';
import { OffloadHarness, offloadedKeysOf, promptOf } from './helpers.js';

/** Three requests whose decodes outgrow a pool of 8 blocks of 4 tokens. */
function crowdedPool(): OffloadHarness {
  const h = new OffloadHarness({ scheduler: { numGpuBlocks: 8, maxModelLen: 32 } });
  h.add('a', { prompt: promptOf(8, 1), maxTokens: 12 });
  h.add('b', { prompt: promptOf(8, 2), maxTokens: 12 });
  h.add('c', { prompt: promptOf(8, 3), maxTokens: 12 });
  return h;
}

describe('preemption with offloading', () => {
  it('flushes a preempted request\'s stores in the step that preempts it', () => {
    const h = crowdedPool();
    const first = h.step();
    const storeOfC = first.offload?.stores.find((s) => s.reqId === 'c');
    expect(storeOfC).toBeDefined();
    const second = h.step();
    expect(second.preemptedReqIds).toEqual(['c']);
    expect(second.offload?.flushReqIds).toEqual(['c']);
    // The store read c's blocks before this step's forward could overwrite them.
    expect(h.stepFinishing(storeOfC!.jobId)).toBe(1);
    h.runUntilIdle();
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });

  it('reloads what a preempted request stored when it resumes instead of recomputing it', () => {
    const h = crowdedPool();
    h.runUntilIdle();
    expect(h.scheduler.stats().preemptions).toBeGreaterThanOrEqual(1);

    const preemptedAt = h.steps.findIndex((s) => s.preemptedReqIds.includes('c'));
    const resumedLoad = h.loads().find((load) => load.reqId === 'c');
    expect(resumedLoad).toBeDefined();
    expect(h.steps.findIndex((s) => s.offload?.loads.includes(resumedLoad!))).toBeGreaterThan(preemptedAt);
    expect(resumedLoad!.cpuBlockIds).toHaveLength(offloadedKeysOf(promptOf(8, 3), 4, 1).length);
    // Once resumed, c never computes its prompt again.
    const resumedSteps = h.steps.slice(preemptedAt + 1).flatMap((s) => s.requests.filter((r) => r.reqId === 'c'));
    expect(resumedSteps.length).toBeGreaterThan(0);
    expect(Math.min(...resumedSteps.map((r) => r.startPosition))).toBeGreaterThanOrEqual(8);

    expect(h.wrongOutputs()).toEqual([]);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });

  it('stores what a resumed request computes after its reload', () => {
    const h = crowdedPool();
    h.runUntilIdle();
    const preemptedAt = h.steps.findIndex((s) => s.preemptedReqIds.includes('c'));
    const storedAfterResume = h.steps
      .slice(preemptedAt + 1)
      .flatMap((s) => s.offload?.stores ?? [])
      .filter((s) => s.reqId === 'c');
    expect(storedAfterResume.length).toBeGreaterThan(0);
    // Every block of c's 19 computed tokens (prompt and decode) is in the tier: 4 full blocks.
    const tokens = [...promptOf(8, 3), ...(h.outputs.get('c') as number[])].slice(0, 19);
    expect(h.manager.lookup(offloadedKeysOf(tokens, 4, 1))).toBe(4);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });
});
