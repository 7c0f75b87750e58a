import { describe, expect, it } from 'vitest';
import { OffloadHarness, offloadedKeysOf, promptOf } from './helpers.js';

/** The real Scheduler and connector over the simulated ranks, blocks of 4 tokens. */
describe('offloading end to end', () => {
  it('serves a repeated prompt from the CPU tier once the GPU lost it, with the reference tokens', async () => {
    const h = new OffloadHarness();
    const prompt = promptOf(22, 1);
    await h.serve('first', { prompt, maxTokens: 3 });
    expect(h.wrongTierBlocks()).toEqual([]);
    h.forgetGpuCache();

    await h.serve('again', { prompt, maxTokens: 5, seed: 9 });
    const [load] = h.loads();
    expect(load.reqId).toBe('again');
    // Five full blocks of the prompt come from the tier; the sixth (2 tokens) is computed.
    expect(load.gpuBlockIds).toHaveLength(5);
    expect(h.scheduler.getRequest('again')).toBeUndefined();
    expect(h.connector.metrics().cpuTierHitTokens).toBe(20);
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it('loads from inside a CPU block when the GPU hit ends mid offloaded block (f = 2)', async () => {
    const h = new OffloadHarness({ offloadFactor: 2 });
    const prompt = promptOf(20, 2);
    await h.serve('warm', { prompt, maxTokens: 1 });
    h.forgetGpuCache();
    // A request sharing only the first GPU block puts it back in the GPU prefix cache.
    await h.serve('short', { prompt: [...prompt.slice(0, 4), ...promptOf(3, 3)], maxTokens: 1 });
    const loadsBefore = h.loads().length;

    await h.serve('long', { prompt: [...prompt, 7, 8], maxTokens: 4 });
    const [load] = h.loads().slice(loadsBefore);
    expect(load.reqId).toBe('long');
    expect(load.firstSubBlock).toBe(1);
    // GPU blocks 1..3: the rest of offloaded block 0 and all of block 1. Tokens 16..21 belong to
    // an offloaded block the warm request never filled, so they are computed.
    expect(load.gpuBlockIds).toHaveLength(3);
    expect(load.cpuBlockIds).toHaveLength(2);
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it('recovers from a failed load by recomputing, and the CPU copy stays loadable', async () => {
    const h = new OffloadHarness();
    const prompt = promptOf(16, 4);
    await h.serve('warm', { prompt, maxTokens: 1 });
    h.forgetGpuCache();
    h.ranks.setLoadFaults((job) => job.gpuBlockIds.slice(1, 2));
    await h.serve('unlucky', { prompt, maxTokens: 4 });
    expect(h.scheduler.stats().loadFailures.blocks).toBe(1);
    h.ranks.setLoadFaults(null);
    h.forgetGpuCache();

    await h.serve('lucky', { prompt, maxTokens: 4, seed: 3 });
    const lastLoad = h.loads().at(-1);
    expect(lastLoad?.reqId).toBe('lucky');
    expect(lastLoad?.gpuBlockIds).toHaveLength(4);
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it('keeps a finished request\'s blocks allocated until its stores completed', async () => {
    const h = new OffloadHarness({ storeLatencySteps: 3 });
    const prompt = promptOf(12, 5);
    h.add('r', { prompt, maxTokens: 1 });
    const first = await h.step();
    const [store] = first.offload?.stores ?? [];
    expect(store.reqId).toBe('r');
    expect(h.finished.has('r')).toBe(true);

    // Finished after one step, but its three blocks are held until the store read them.
    const held: number[] = [];
    while (h.stepFinishing(store.jobId) < 0) {
      held.push(h.scheduler.stats().kvCache.referenced);
      await h.step();
    }
    expect(held.length).toBeGreaterThan(1);
    expect(held.every((n) => n === 3)).toBe(true);
    await h.runUntilIdle();
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(h.manager.lookup(offloadedKeysOf(prompt, 4, 1))).toBe(3);
    expect(await h.leaks()).toEqual([]);
  });

  it('keeps an aborted request\'s blocks until the load it issued finished', async () => {
    const h = new OffloadHarness({ loadLatencySteps: 3 });
    const prompt = promptOf(16, 6);
    await h.serve('warm', { prompt, maxTokens: 1 });
    h.forgetGpuCache();

    h.add('r', { prompt, maxTokens: 4 });
    const admitted = await h.step();
    const [load] = admitted.offload?.loads ?? [];
    expect(load.reqId).toBe('r');
    expect(h.abort('r')).toBe(true);
    const heldWhileLoading: number[] = [];
    while (h.stepFinishing(load.jobId) < 0) {
      heldWhileLoading.push(h.scheduler.stats().kvCache.referenced);
      await h.step();
    }
    expect(heldWhileLoading.length).toBeGreaterThan(1);
    expect(heldWhileLoading.every((n) => n >= load.gpuBlockIds.length)).toBe(true);
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(h.manager.stats().pinnedBlocks).toBe(0);
    await h.runUntilIdle();
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });
});
