import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../src/core/block-hash.js';
import { OffloadingConnector } from '../../src/connector/scheduler-connector.js';
import { StoreOnEvictPolicy } from '../../src/offload/store-policies/on-evict.js';
import { offloadGeometry, type GpuPrefixCache } from '../../src/offload/store-policies/store-policy.js';
import type { StepView } from '../../src/scheduler/connector-port.js';
import type { Request } from '../../src/scheduler/request.js';
import { bareRequest, promptOf, ScriptedManager } from './helpers.js';

/** A GPU prefix cache the test sets block by block. */
class FakeGpuCache implements GpuPrefixCache {
  readonly numBlocks = 64;
  private readonly blocks = new Map<BlockHash, { id: number; pendingJob: number | null }>();

  cache(hash: BlockHash, id: number, pendingJob: number | null = null): void {
    this.blocks.set(hash, { id, pendingJob });
  }

  /** The prefix cache drops the hash (the scheduler evicts before reusing the block). */
  evict(hash: BlockHash): void {
    this.blocks.delete(hash);
  }

  getCachedBlock(hash: BlockHash) {
    return this.blocks.get(hash) ?? null;
  }
}

/** A write-back connector over a scripted manager and a fake GPU cache (blocks of 4 tokens). */
function writeBack(offloadFactor: number) {
  const geometry = offloadGeometry(4, offloadFactor);
  const manager = new ScriptedManager(16);
  const connector = new OffloadingConnector({
    manager,
    policy: new StoreOnEvictPolicy(geometry),
    geometry,
    bytesPerGpuBlock: 1,
  });
  const gpu = new FakeGpuCache();
  connector.attachGpuPrefixCache(gpu);
  return { connector, manager, gpu };
}

/** A finished request whose blocks the GPU caches at ids `firstId`, `firstId + 1`, ... */
function finishedRequest(
  setup: ReturnType<typeof writeBack>,
  id: string,
  numTokens: number,
  firstId: number,
): Request {
  const request = bareRequest(id, promptOf(numTokens, firstId + 1), 4);
  request.blockHashes.forEach((hash, i) => setup.gpu.cache(hash, firstId + i));
  setup.connector.requestFinished(request, request.blockHashes.map((_, i) => firstId + i));
  return request;
}

/** The GPU evicts the cached blocks of `hashes` while the next step is scheduled. */
function evict(setup: ReturnType<typeof writeBack>, hashes: readonly BlockHash[]): void {
  for (const hash of hashes) {
    const block = setup.gpu.getCachedBlock(hash);
    if (block === null) throw new Error(`hash ${hash} is not cached`);
    setup.connector.onGpuBlockEvicted(block.id, hash);
    setup.gpu.evict(hash);
  }
}

const IDLE_STEP: StepView = { step: 0, scheduled: [], preemptedReqIds: [] };

describe('the on-evict store policy', () => {
  it('stores an evicted block with a fence, as a write-back job of no request (f = 1)', () => {
    const setup = writeBack(1);
    const request = finishedRequest(setup, 'r', 8, 10);
    evict(setup, [request.blockHashes[1]]);
    const { stores } = setup.connector.buildConnectorMeta(IDLE_STEP);
    expect(stores).toHaveLength(1);
    expect(stores[0]).toMatchObject({ reqId: null, fence: true, gpuBlockIds: [11], direction: 'gpuToCpu' });
    expect(setup.manager.storeOffers).toEqual([[request.blockHashes[1]]]);
    // Nothing is left over for the next step.
    expect(setup.connector.buildConnectorMeta({ ...IDLE_STEP, step: 1 }).stores).toEqual([]);
  });

  it('stores a group with its sibling still cached when one of its blocks is evicted (f = 2)', () => {
    const setup = writeBack(2);
    const request = finishedRequest(setup, 'r', 8, 20);
    evict(setup, [request.blockHashes[1]]);
    const { stores } = setup.connector.buildConnectorMeta(IDLE_STEP);
    expect(stores).toHaveLength(1);
    expect(stores[0].gpuBlockIds).toEqual([20, 21]);
    expect(stores[0].cpuBlockIds).toHaveLength(1);
  });

  it('stores a group whose blocks were both evicted in the same step (f = 2)', () => {
    const setup = writeBack(2);
    const request = finishedRequest(setup, 'r', 8, 30);
    evict(setup, request.blockHashes);
    expect(setup.connector.buildConnectorMeta(IDLE_STEP).stores.map((s) => s.gpuBlockIds)).toEqual([[30, 31]]);
  });

  it('skips a group whose other block was overwritten in an earlier step (f = 2)', () => {
    const setup = writeBack(2);
    const request = finishedRequest(setup, 'r', 8, 40);
    // The first block's content was lost without an eviction (say, its load failed).
    setup.gpu.evict(request.blockHashes[0]);
    evict(setup, [request.blockHashes[1]]);
    expect(setup.connector.buildConnectorMeta(IDLE_STEP).stores).toEqual([]);
    expect(setup.manager.storeOffers).toEqual([]);
  });

  it('skips a group whose other block a load is still writing (f = 2)', () => {
    const setup = writeBack(2);
    const request = finishedRequest(setup, 'r', 8, 50);
    setup.gpu.cache(request.blockHashes[0], 50, 99);
    evict(setup, [request.blockHashes[1]]);
    expect(setup.connector.buildConnectorMeta(IDLE_STEP).stores).toEqual([]);
  });

  it("skips a group whose other block this step's forward writes (f = 2)", () => {
    const setup = writeBack(2);
    const request = finishedRequest(setup, 'r', 8, 60);
    // Block 60 holds the first hash's content in the cache, but a running request computes into it
    // this step (its hash entered the cache at allocation, before the forward writes it).
    const writer = bareRequest('w', promptOf(4, 99), 4);
    writer.numComputedTokens = 4;
    evict(setup, [request.blockHashes[1]]);
    const step: StepView = {
      step: 0,
      scheduled: [{ request: writer, blockIds: [60], numScheduledTokens: 4, fresh: true }],
      preemptedReqIds: [],
    };
    expect(setup.connector.buildConnectorMeta(step).stores).toEqual([]);
  });

  it('does not store again a block the tier already holds', () => {
    const setup = writeBack(1);
    const request = finishedRequest(setup, 'r', 8, 70);
    setup.manager.hold([request.blockHashes[0]]);
    evict(setup, request.blockHashes);
    const { stores } = setup.connector.buildConnectorMeta(IDLE_STEP);
    expect(stores.map((s) => s.gpuBlockIds)).toEqual([[71]]);
  });

  it('stores block by block what fits when the whole batch does not', () => {
    const setup = writeBack(1);
    const request = finishedRequest(setup, 'r', 12, 80);
    setup.manager.refusals = 1;
    evict(setup, request.blockHashes);
    const { stores } = setup.connector.buildConnectorMeta(IDLE_STEP);
    expect(setup.manager.storeOffers).toHaveLength(4);
    expect(stores.map((s) => s.gpuBlockIds)).toEqual([[80], [81], [82]]);
  });

  it('does not free a finished request\'s blocks late: write-back stores belong to no request', () => {
    const setup = writeBack(1);
    const request = finishedRequest(setup, 'r', 8, 90);
    evict(setup, request.blockHashes);
    setup.connector.buildConnectorMeta(IDLE_STEP);
    expect(setup.connector.requestFinished(request, [])).toBe(false);
    expect(setup.connector.hasPendingWork()).toBe(true);
  });
});
