import { describe, expect, it } from 'vitest';
import type { OffloadingConnector } from '../../src/connector/scheduler-connector.js';
import { createOffloadingConnector } from '../../src/connector/create-connector.js';
import { kvGeometry } from '../../src/core/kv-geometry.js';
import type { SchedulerConnector, StepView } from '../../src/scheduler/connector-port.js';
import type { OffloadStepMetadata } from '../../src/protocol/step-protocol.js';
import { OffloadHarness, offloadedKeysOf, promptOf, TINY, type OffloadHarnessOptions } from './helpers.js';

/** Six distinct 16-token prompts through a GPU pool of 12 blocks (48 tokens): the GPU must evict. */
async function workingSetLargerThanGpu(options: OffloadHarnessOptions = {}): Promise<OffloadHarness> {
  const h = new OffloadHarness({ storePolicy: 'on-evict', scheduler: { numGpuBlocks: 12, maxModelLen: 48 }, ...options });
  for (let i = 0; i < 6; i++) await h.serve(`r${i}`, { prompt: promptOf(16, 100 + i), maxTokens: 2, seed: i });
  return h;
}

/** The connector as the scheduler sees it, but with every store's fence removed (a control run). */
function withoutFences(connector: OffloadingConnector): SchedulerConnector {
  return {
    getNumNewMatchedTokens: (r, n) => connector.getNumNewMatchedTokens(r, n),
    updateStateAfterAlloc: (r, b, n) => connector.updateStateAfterAlloc(r, b, n),
    buildConnectorMeta: (step: StepView): OffloadStepMetadata => {
      const meta = connector.buildConnectorMeta(step);
      return { ...meta, stores: meta.stores.map((s) => ({ ...s, fence: false })) };
    },
    updateConnectorOutput: (o) => connector.updateConnectorOutput(o),
    requestFinished: (r, b) => connector.requestFinished(r, b),
    hasPendingWork: () => connector.hasPendingWork(),
    reset: () => connector.reset(),
    onGpuBlockEvicted: (id, hash) => connector.onGpuBlockEvicted(id, hash),
  };
}

describe('store on evict (write-back)', () => {
  it('stores nothing while computing', async () => {
    const h = new OffloadHarness({ storePolicy: 'on-evict' });
    await h.serve('r', { prompt: promptOf(16, 1), maxTokens: 4 });
    expect(h.stores()).toEqual([]);
    expect(h.manager.stats().usedBlocks).toBe(0);
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it('fills the CPU tier with the blocks the GPU evicted, each read before it was overwritten', async () => {
    const h = await workingSetLargerThanGpu();
    const metrics = h.connector.metrics();
    expect(metrics.gpuBlocksEvicted).toBeGreaterThan(0);
    expect(metrics.offloadedBlocksStored).toBe(metrics.gpuBlocksEvicted);
    expect(h.stores().every((s) => s.fence && s.reqId === null)).toBe(true);
    // The earliest prompts left the GPU and now live in the tier.
    const firstKeys = offloadedKeysOf(promptOf(16, 100), 4, 1);
    const cache = h.scheduler.kvCacheManager.pool;
    expect(firstKeys.filter((k) => cache.getCachedBlock(k) !== null)).toEqual([]);
    expect(h.manager.lookup(firstKeys)).toBe(4);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it('serves an evicted prompt from the CPU tier with the reference tokens', async () => {
    const h = await workingSetLargerThanGpu();
    const loadsBefore = h.loads().length;
    await h.serve('again', { prompt: promptOf(16, 100), maxTokens: 3, seed: 42 });
    const loads = h.loads().slice(loadsBefore);
    expect(loads).toHaveLength(1);
    expect(loads[0].gpuBlockIds).toHaveLength(4);
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it('leaves overwritten blocks in the tier when its stores are not fenced (control run)', async () => {
    const h = await workingSetLargerThanGpu({ wrapConnector: withoutFences });
    expect(h.connector.metrics().offloadedBlocksStored).toBeGreaterThan(0);
    expect(h.wrongTierBlocks().length).toBeGreaterThan(0);
  });

  it('stores a whole offloaded block when one of its GPU blocks is evicted and the others still hold it (f = 2)', async () => {
    const h = await workingSetLargerThanGpu({ offloadFactor: 2 });
    const metrics = h.connector.metrics();
    expect(metrics.offloadedBlocksStored).toBeGreaterThan(0);
    expect(h.stores().every((s) => s.fence && s.gpuBlockIds.length === 2 * s.cpuBlockIds.length)).toBe(true);
    expect(h.wrongTierBlocks()).toEqual([]);

    const loadsBefore = h.loads().length;
    await h.serve('again', { prompt: promptOf(16, 100), maxTokens: 3, seed: 42 });
    expect(h.loads().slice(loadsBefore).length).toBe(1);
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it('needs the GPU prefix cache when an offloaded block spans several GPU blocks', async () => {
    const { connector } = createOffloadingConnector({
      geometry: kvGeometry({ model: TINY, tp: 1, blockSize: 4, offloadFactor: 2 }), cpuBlocks: 8, eviction: 'lru', storePolicy: 'on-evict',
    });
    expect(() => connector.buildConnectorMeta({ step: 0, scheduled: [], preemptedReqIds: [] })).toThrow(
      /attachGpuPrefixCache/,
    );
  });
});
