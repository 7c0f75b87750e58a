import { describe, expect, it } from 'vitest';
import { OffloadHarness, offloadedKeysOf, promptOf } from './helpers.js';

/** The real Scheduler and connector over the simulated runner, blocks of 4 tokens. */
describe('offloading end to end', () => {
  it('serves a repeated prompt from the CPU tier once the GPU lost it, with the reference tokens', () => {
    const h = new OffloadHarness();
    const prompt = promptOf(22, 1);
    h.serve('first', { prompt, maxTokens: 3 });
    expect(h.wrongTierBlocks()).toEqual([]);
    h.forgetGpuCache();

    h.serve('again', { prompt, maxTokens: 5, seed: 9 });
    const [load] = h.loads();
    expect(load.reqId).toBe('again');
    // Five full blocks of the prompt come from the tier; the sixth (2 tokens) is computed.
    expect(load.gpuBlockIds).toHaveLength(5);
    expect(h.scheduler.getRequest('again')).toBeUndefined();
    expect(h.connector.metrics().cpuHitTokens).toBe(20);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });

  it('loads from inside a CPU block when the GPU hit ends mid offloaded block (f = 2)', () => {
    const h = new OffloadHarness({ offloadFactor: 2 });
    const prompt = promptOf(20, 2);
    h.serve('warm', { prompt, maxTokens: 1 });
    h.forgetGpuCache();
    // A request sharing only the first GPU block puts it back in the GPU prefix cache.
    h.serve('short', { prompt: [...prompt.slice(0, 4), ...promptOf(3, 3)], maxTokens: 1 });
    const loadsBefore = h.loads().length;

    h.serve('long', { prompt: [...prompt, 7, 8], maxTokens: 4 });
    const [load] = h.loads().slice(loadsBefore);
    expect(load.reqId).toBe('long');
    expect(load.firstSubBlock).toBe(1);
    // GPU blocks 1..3: the rest of offloaded block 0 and all of block 1. Tokens 16..21 belong to
    // an offloaded block the warm request never filled, so they are computed.
    expect(load.gpuBlockIds).toHaveLength(3);
    expect(load.cpuBlockIds).toHaveLength(2);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });

  it('recovers from a failed load by recomputing, and the CPU copy stays loadable', () => {
    const h = new OffloadHarness();
    const prompt = promptOf(16, 4);
    h.serve('warm', { prompt, maxTokens: 1 });
    h.forgetGpuCache();
    h.runner.setLoadFaults((job) => job.gpuBlockIds.slice(1, 2));
    h.serve('unlucky', { prompt, maxTokens: 4 });
    expect(h.scheduler.stats().loadFailures.blocks).toBe(1);
    h.runner.setLoadFaults(null);
    h.forgetGpuCache();

    h.serve('lucky', { prompt, maxTokens: 4, seed: 3 });
    const lastLoad = h.loads().at(-1);
    expect(lastLoad?.reqId).toBe('lucky');
    expect(lastLoad?.gpuBlockIds).toHaveLength(4);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });

  it('keeps a finished request\'s blocks allocated until its stores completed', () => {
    const h = new OffloadHarness({ storeLatencySteps: 3 });
    const prompt = promptOf(12, 5);
    h.add('r', { prompt, maxTokens: 1 });
    const first = h.step();
    const [store] = first.offload?.stores ?? [];
    expect(store.reqId).toBe('r');
    expect(h.finished.has('r')).toBe(true);

    // Finished after one step, but its three blocks are held until the store read them.
    const held: number[] = [];
    while (h.stepFinishing(store.jobId) < 0) {
      held.push(h.scheduler.stats().kvCache.referenced);
      h.step();
    }
    expect(held.length).toBeGreaterThan(1);
    expect(held.every((n) => n === 3)).toBe(true);
    h.runUntilIdle();
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(h.manager.lookup(offloadedKeysOf(prompt, 4, 1))).toBe(3);
    expect(h.leaks()).toEqual([]);
  });

  it('keeps an aborted request\'s blocks until the load it issued finished', () => {
    const h = new OffloadHarness({ loadLatencySteps: 3 });
    const prompt = promptOf(16, 6);
    h.serve('warm', { prompt, maxTokens: 1 });
    h.forgetGpuCache();

    h.add('r', { prompt, maxTokens: 4 });
    const admitted = h.step();
    const [load] = admitted.offload?.loads ?? [];
    expect(load.reqId).toBe('r');
    expect(h.abort('r')).toBe(true);
    const heldWhileLoading: number[] = [];
    while (h.stepFinishing(load.jobId) < 0) {
      heldWhileLoading.push(h.scheduler.stats().kvCache.referenced);
      h.step();
    }
    expect(heldWhileLoading.length).toBeGreaterThan(1);
    expect(heldWhileLoading.every((n) => n >= load.gpuBlockIds.length)).toBe(true);
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(h.manager.stats().pinnedBlocks).toBe(0);
    h.runUntilIdle();
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.leaks()).toEqual([]);
  });
});
