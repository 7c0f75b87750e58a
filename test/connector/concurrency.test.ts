import { describe, expect, it } from 'vitest';
import { OffloadHarness, offloadedKeysOf, promptOf } from './helpers.js';

/** A harness whose CPU tier holds `prefixes` and whose GPU cache holds nothing. */
function tierHolding(prefixes: readonly number[][], options: { loadLatencySteps?: number } = {}): OffloadHarness {
  const h = new OffloadHarness({ loadLatencySteps: options.loadLatencySteps });
  prefixes.forEach((prefix, i) => h.serve(`warm-${i}`, { prompt: prefix, maxTokens: 1 }));
  h.forgetGpuCache();
  return h;
}

describe('concurrent requests and in-flight loads', () => {
  it('issues exactly one load for N requests sharing a CPU-resident prefix, and runs all of them right after it lands', () => {
    const prefix = promptOf(16, 1);
    const h = tierHolding([prefix]);
    const loadsBefore = h.loads().length;
    const ids = ['r0', 'r1', 'r2', 'r3'];
    ids.forEach((id, i) => h.add(id, { prompt: [...prefix, ...promptOf(3 + i, 10 + i)], maxTokens: 3, seed: i }));
    h.runUntilIdle();

    const loads = h.loads().slice(loadsBefore);
    expect(loads).toHaveLength(1);
    expect(loads[0].gpuBlockIds).toHaveLength(4);
    const landed = h.stepFinishing(loads[0].jobId);
    for (const id of ids) expect(h.firstStepScheduling(id)).toBe(landed + 1);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });

  it('loads a prompt identical to one being loaded only once, even past the GPU hit cap', () => {
    const prompt = promptOf(16, 2);
    const h = tierHolding([prompt]);
    const loadsBefore = h.loads().length;
    h.add('first', { prompt, maxTokens: 2 });
    h.add('second', { prompt, maxTokens: 2, seed: 5 });
    h.runUntilIdle();
    const loads = h.loads().slice(loadsBefore);
    expect(loads.map((l) => l.reqId)).toEqual(['first']);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });

  it('loads only the blocks past the part it shares with an in-flight load, concurrently, and waits for nothing else', () => {
    const shared = promptOf(8, 3);
    const p = [...shared, ...promptOf(8, 4)];
    const q = [...shared, ...promptOf(8, 5)];
    const h = tierHolding([p, q], { loadLatencySteps: 3 });
    const loadsBefore = h.loads().length;

    h.add('first', { prompt: [...p, 1], maxTokens: 2 });
    h.step();
    h.add('second', { prompt: [...q, 2], maxTokens: 2 });
    h.step();
    const [firstLoad, secondLoad] = h.loads().slice(loadsBefore);
    expect(firstLoad.reqId).toBe('first');
    expect(secondLoad.reqId).toBe('second');
    // The shared blocks come with the first load; the second brings only q's own blocks.
    expect(firstLoad.gpuBlockIds).toHaveLength(4);
    expect(secondLoad.gpuBlockIds).toHaveLength(2);
    const secondKeys = offloadedKeysOf(q, 4, 1).slice(2);
    expect(h.manager.stats().pinnedBlocks).toBe(4 + secondKeys.length);
    // Both loads are in flight at once.
    expect(h.stepFinishing(firstLoad.jobId)).toBe(-1);

    h.runUntilIdle();
    const dependsOn = Math.max(h.stepFinishing(firstLoad.jobId), h.stepFinishing(secondLoad.jobId));
    expect(h.firstStepScheduling('second')).toBe(dependsOn + 1);
    expect(h.firstStepScheduling('first')).toBe(h.stepFinishing(firstLoad.jobId) + 1);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });
});
