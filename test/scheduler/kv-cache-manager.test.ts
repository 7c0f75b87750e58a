import { describe, expect, it } from 'vitest';
import { KVCacheManager } from '../../src/scheduler/kv-cache-manager.js';
import { createRequest, type Request } from '../../src/scheduler/request.js';
import { promptOf } from './helpers.js';

const BLOCK = 4;
const limits = { vocabSize: 32000, maxModelLen: 256, blockSize: BLOCK };

function manager(numGpuBlocks = 32, enablePrefixCaching = true): KVCacheManager {
  return new KVCacheManager({ blockSize: BLOCK, numGpuBlocks, enablePrefixCaching });
}

function request(id: string, prompt: number[], maxTokens = 4): Request {
  return createRequest({ id, promptTokens: prompt, maxTokens }, limits);
}

/** Computes the whole prompt of `req` as one step would: allocate, advance, cache. */
function computePrompt(kv: KVCacheManager, req: Request): void {
  const ids = kv.allocateSlots(req, req.numTokens);
  expect(ids).not.toBeNull();
  req.numComputedTokens = req.numTokens;
}

describe('KV cache manager: prefix hits', () => {
  it('finds no hit for an unseen prompt', () => {
    const kv = manager();
    const hit = kv.getComputedBlocks(request('a', promptOf(12, 1)));
    expect(hit.numComputedTokens).toBe(0);
    expect(hit.blocks).toHaveLength(0);
  });

  it('finds a partial hit: the shared full blocks only', () => {
    const kv = manager();
    const shared = promptOf(8, 1);
    const first = request('a', [...shared, ...promptOf(5, 2)]);
    computePrompt(kv, first);
    const second = request('b', [...shared, 99, 98, 97, 96, 95]);
    const hit = kv.getComputedBlocks(second);
    expect(hit.numComputedTokens).toBe(8);
    expect(hit.blocks.map((b) => b.id)).toEqual(kv.getBlockIds(first).slice(0, 2));
  });

  it('finds a full hit, capped so the last prompt token is still computed', () => {
    const kv = manager();
    const prompt = promptOf(12, 3); // exactly three blocks
    computePrompt(kv, request('a', prompt));
    const hit = kv.getComputedBlocks(request('b', prompt));
    expect(hit.numComputedTokens).toBe(8);
    const longer = kv.getComputedBlocks(request('c', [...prompt, 5]));
    expect(longer.numComputedTokens).toBe(12);
  });

  it('finds nothing when prefix caching is off', () => {
    const kv = manager(32, false);
    const prompt = promptOf(12, 3);
    computePrompt(kv, request('a', prompt));
    expect(kv.getComputedBlocks(request('b', [...prompt, 1])).numComputedTokens).toBe(0);
    expect(kv.usage().cached).toBe(0);
  });

  it('does not match a request whose cache salt differs', () => {
    const kv = manager();
    const prompt = promptOf(9, 4);
    computePrompt(kv, createRequest({ id: 'a', promptTokens: prompt, maxTokens: 1, cacheSalt: 'x' }, limits));
    const other = createRequest({ id: 'b', promptTokens: prompt, maxTokens: 1, cacheSalt: 'y' }, limits);
    expect(kv.getComputedBlocks(other).numComputedTokens).toBe(0);
  });
});

describe('KV cache manager: allocation', () => {
  it('returns null and changes nothing when the blocks do not fit', () => {
    const kv = manager(3);
    const req = request('a', promptOf(13, 1));
    expect(kv.allocateSlots(req, 13)).toBeNull();
    expect(kv.hasBlocks(req)).toBe(false);
    expect(kv.usage().free).toBe(3);
  });

  it('counts evictable cached blocks as free, evicting them', () => {
    const kv = manager(4);
    const a = request('a', promptOf(16, 1));
    computePrompt(kv, a);
    kv.free(a);
    expect(kv.usage()).toMatchObject({ free: 4, cached: 4 });
    const b = request('b', promptOf(16, 2));
    expect(kv.allocateSlots(b, 16)).toHaveLength(4);
    expect(kv.getComputedBlocks(request('c', [...promptOf(16, 1), 1])).numComputedTokens).toBe(0);
  });

  it('counts a free cached hit as taken when checking room', () => {
    const kv = manager(4);
    const prompt = promptOf(8, 1);
    const a = request('a', prompt);
    computePrompt(kv, a);
    kv.free(a);
    // b hits both of a's blocks (they sit in the free queue) and needs 3 more: 5 > 4.
    const b = request('b', [...prompt, ...promptOf(12, 2)]);
    const hit = kv.getComputedBlocks(b);
    expect(hit.numComputedTokens).toBe(8);
    expect(kv.allocateSlots(b, 12, { newComputedBlocks: hit.blocks, numNewComputedTokens: 8 })).toBeNull();
    expect(kv.pool.checkConsistency()).toEqual([]);
  });

  it('caches the full blocks of the tokens scheduled, not the partial last one', () => {
    const kv = manager();
    const req = request('a', promptOf(10, 1));
    kv.allocateSlots(req, 6);
    expect(kv.usage().cached).toBe(1);
    req.numComputedTokens = 6;
    kv.allocateSlots(req, 4);
    expect(kv.usage().cached).toBe(2);
    expect(kv.numBlocksOf(req)).toBe(3);
  });

  it('reserves lookahead blocks without caching them', () => {
    const kv = manager();
    const req = request('a', promptOf(12, 1));
    kv.allocateSlots(req, 0, { numExternalComputedTokens: 4, numLookaheadTokens: 8 });
    expect(kv.numBlocksOf(req)).toBe(3);
    expect(kv.usage().cached).toBe(1);
  });

  it('frees a table last block first, so the prefix is evicted last', () => {
    const kv = manager(3);
    const req = request('a', promptOf(12, 1));
    computePrompt(kv, req);
    const ids = kv.getBlockIds(req);
    kv.free(req);
    expect(kv.pool.freeQueueOrder()).toEqual(ids.slice().reverse());
  });
});

describe('KV cache manager: blocks being loaded', () => {
  it('registers loading blocks in the prefix cache as pending on their job', () => {
    const kv = manager();
    const prompt = promptOf(12, 1);
    const loader = request('a', prompt);
    kv.allocateSlots(loader, 0, { numExternalComputedTokens: 8, numLookaheadTokens: 4 });
    kv.markLoading(loader, 0, 2, 41);
    const hit = kv.getComputedBlocks(request('b', [...prompt, 1]));
    expect(hit.numComputedTokens).toBe(8);
    expect([...hit.pendingJobs]).toEqual([41]);
    kv.completeLoading(41, []);
    const after = kv.getComputedBlocks(request('c', [...prompt, 1]));
    expect(after.numComputedTokens).toBe(8);
    expect(after.pendingJobs.size).toBe(0);
  });

  it('drops the failed blocks of a load from the prefix cache when it completes', () => {
    const kv = manager();
    const prompt = promptOf(12, 1);
    const loader = request('a', prompt);
    kv.allocateSlots(loader, 0, { numExternalComputedTokens: 8 });
    kv.markLoading(loader, 0, 2, 7);
    const failed = kv.getBlockIds(loader)[1];
    kv.completeLoading(7, [failed]);
    expect(kv.getComputedBlocks(request('b', [...prompt, 1])).numComputedTokens).toBe(4);
    expect(kv.usage().pending).toBe(0);
  });
});
