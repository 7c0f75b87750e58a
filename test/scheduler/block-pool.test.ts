import { describe, expect, it } from 'vitest';
import { BlockPool } from '../../src/scheduler/block-pool.js';
import type { KVBlock } from '../../src/scheduler/kv-block.js';

/** Allocates `n` blocks and caches them under hashes h<first>, h<first+1>, ... */
function cachedBlocks(pool: BlockPool, n: number, first: number): KVBlock[] {
  const blocks = pool.allocate(n);
  const hashes = blocks.map((_, i) => `h${first + i}`.padStart(16, '0'));
  pool.cacheFullBlocks(blocks, hashes, 0, n);
  return blocks;
}

const hash = (i: number): string => `h${i}`.padStart(16, '0');

describe('block pool', () => {
  it('hands out blocks from the head of the free queue and takes them back at the tail', () => {
    const pool = new BlockPool(4);
    const [a, b] = pool.allocate(2);
    expect([a.id, b.id]).toEqual([0, 1]);
    expect(pool.numFreeBlocks).toBe(2);
    pool.cacheFullBlocks([a, b], [hash(0), hash(1)], 0, 2);
    pool.free([b, a]);
    expect(pool.freeQueueOrder()).toEqual([2, 3, 1, 0]);
    expect(pool.checkConsistency()).toEqual([]);
  });

  it('evicts the least recently freed cached blocks first, a request tail before its prefix', () => {
    const pool = new BlockPool(6);
    const first = cachedBlocks(pool, 3, 0); // one request's table
    const second = cachedBlocks(pool, 3, 10);
    // Requests free their tables in reverse: tail blocks join the queue first.
    pool.free(first.slice().reverse());
    pool.free(second.slice().reverse());
    const evicted: string[] = [];
    pool.setEvictionObserver((_id, h) => evicted.push(h));
    pool.allocate(4);
    expect(evicted).toEqual([hash(2), hash(1), hash(0), hash(12)]);
    expect(pool.getCachedBlock(hash(11))).toBe(second[1]);
    expect(pool.getCachedBlock(hash(0))).toBeNull();
    expect(pool.checkConsistency()).toEqual([]);
  });

  it('shows the observer an evicted block while it still carries its hash', () => {
    const pool = new BlockPool(1);
    const [block] = cachedBlocks(pool, 1, 0);
    pool.free([block]);
    const seen: Array<[number, string, string | null]> = [];
    pool.setEvictionObserver((id, h) => seen.push([id, h, pool.block(id).hash]));
    pool.allocate(1);
    expect(seen).toEqual([[0, hash(0), hash(0)]]);
    expect(pool.block(0).hash).toBeNull();
  });

  it('reuses a freed block without a hash before any cached block', () => {
    const pool = new BlockPool(3);
    const [cached, partial] = pool.allocate(2);
    pool.cacheFullBlocks([cached], [hash(0)], 0, 1);
    pool.free([partial, cached]);
    expect(pool.freeQueueOrder()).toEqual([1, 2, 0]);
  });

  it('takes a prefix hit out of the free queue and keeps it until every holder freed it', () => {
    const pool = new BlockPool(3);
    const [block] = cachedBlocks(pool, 1, 0);
    pool.free([block]);
    pool.touch([block]);
    pool.touch([block]);
    expect(block.refCnt).toBe(2);
    expect(pool.numFreeBlocks).toBe(2);
    pool.free([block]);
    expect(pool.numFreeBlocks).toBe(2);
    pool.free([block]);
    expect(pool.numFreeBlocks).toBe(3);
    expect(pool.getCachedBlock(hash(0))).toBe(block);
    expect(pool.checkConsistency()).toEqual([]);
  });

  it('caches only the first of two blocks with the same contents', () => {
    const pool = new BlockPool(2);
    const [a, b] = pool.allocate(2);
    pool.cacheFullBlocks([a], [hash(5)], 0, 1);
    pool.cacheFullBlocks([b], [hash(5)], 0, 1);
    expect(pool.getCachedBlock(hash(5))).toBe(a);
    expect(b.hash).toBeNull();
    expect(pool.counts().cached).toBe(1);
  });

  it('removes failed blocks from the prefix cache', () => {
    const pool = new BlockPool(4);
    const blocks = cachedBlocks(pool, 3, 0);
    expect(pool.removeFromPrefixCache([blocks[1].id, 3])).toBe(1);
    expect(pool.getCachedBlock(hash(1))).toBeNull();
    expect(pool.getCachedBlock(hash(2))).toBe(blocks[2]);
    expect(pool.checkConsistency()).toEqual([]);
  });

  it('refuses to reset the prefix cache while a block is held', () => {
    const pool = new BlockPool(2);
    const [block] = cachedBlocks(pool, 1, 0);
    expect(pool.resetPrefixCache()).toBe(false);
    expect(pool.getCachedBlock(hash(0))).toBe(block);
    pool.free([block]);
    expect(pool.resetPrefixCache()).toBe(true);
    expect(pool.counts()).toEqual({ free: 2, cached: 0, referenced: 0, pending: 0 });
  });

  it('reports broken invariants through its consistency check', () => {
    const pool = new BlockPool(2);
    const [block] = pool.allocate(1);
    block.refCnt = 0; // corrupted on purpose: neither held nor free
    expect(pool.checkConsistency()).toContain('block 0 is neither free nor held (refCnt 0)');
  });

  it('refuses to allocate more blocks than are free', () => {
    const pool = new BlockPool(2);
    expect(() => pool.allocate(3)).toThrow(/only 2 free/);
  });
});
