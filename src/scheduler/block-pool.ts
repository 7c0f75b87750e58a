import { blockHashLane, blockHashLanesAreValue, formatBlockHash, type BlockHash } from '../core/block-hash.js';
import { ABSENT, LaneHashTable } from '../core/lane-hash-table.js';
import { storedRunArrays, type BlockTokenSource, type HashWords, type TierEventSink } from '../events/kv-cache-events.js';
import { FreeBlockQueue } from './free-block-queue.js';
import { KVBlock } from './kv-block.js';

/**
 * The GPU blocks of the paged KV cache with their prefix cache.
 *
 * Free blocks wait in one queue: allocation takes the head, freed blocks
 * join the tail, so among cached free blocks the least recently used is
 * evicted first. A freed block without a hash holds nothing reusable and
 * joins the head instead, to be reused before any cached block.
 *
 * A block is in the prefix cache (has a hash) exactly when the index points
 * at it; when two blocks end up with the same contents only the first is
 * cached, the other stays anonymous.
 *
 * The index maps a hash's two 32-bit lanes to a block id in typed arrays
 * (LaneHashTable): it holds no strings or objects, so its size costs the
 * garbage collector nothing. A hit is confirmed against the block's hash
 * string, so a key that is not 16 hex digits (its lanes are a fingerprint)
 * never matches another string; two different strings with the same lanes
 * count as one key, whichever was cached first.
 *
 * Beside each cached block the pool keeps its hash's value as the two
 * words a KV event carries (the lanes its index keyed it on, when they are
 * the value), so its events hand the words over with no lookup of the text.
 */

/** Called when a free cached block is taken for reuse, before its hash is dropped (its contents are still intact). */
export type EvictionObserver = (blockId: number, hash: BlockHash) => void;

/** A request's tokens, read when its blocks enter the prefix cache while events are reported. */
export type BlockTokens = BlockTokenSource;

export interface BlockPoolCounts {
  /** Blocks in the free queue (cached or not): what allocation may use. */
  readonly free: number;
  /** Blocks in the prefix cache (referenced or not). */
  readonly cached: number;
  /** Blocks held by at least one request. */
  readonly referenced: number;
  /** Blocks an in-flight load is still writing. */
  readonly pending: number;
}

export class BlockPool {
  readonly numBlocks: number;
  private readonly blocks: KVBlock[];
  private readonly freeQueue = new FreeBlockQueue();
  private readonly cachedByHash: LaneHashTable;
  private evictionObserver: EvictionObserver | null = null;
  private eventSink: TierEventSink | null = null;
  private numPending = 0;
  private numEvicted = 0;
  /** By block id: its hash's value words (high, low), meaningful while hashIsValue is 1 (cached, a 16-hex-digit hash). */
  private readonly hashWords: Int32Array;
  private readonly hashIsValue: Uint8Array;
  /** A stored run's words as the event sink takes them, the parent's pair first; grown as runs need. */
  private runWords: Int32Array = new Int32Array(16);

  constructor(numBlocks: number) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) {
      throw new RangeError(`numBlocks must be an integer >= 1, got ${numBlocks}`);
    }
    this.numBlocks = numBlocks;
    this.blocks = [];
    this.cachedByHash = new LaneHashTable(numBlocks);
    this.hashWords = new Int32Array(2 * numBlocks);
    this.hashIsValue = new Uint8Array(numBlocks);
    for (let id = 0; id < numBlocks; id++) {
      const block = new KVBlock(id);
      this.blocks.push(block);
      this.freeQueue.append(block);
    }
  }

  setEvictionObserver(observer: EvictionObserver | null): void {
    this.evictionObserver = observer;
  }

  /** Where blocks entering and leaving the prefix cache are reported (KV events); null: nowhere. */
  setEventSink(sink: TierEventSink | null): void {
    this.eventSink = sink;
  }

  /** The hashes the prefix cache holds now, in block id order. */
  cachedHashes(): BlockHash[] {
    const hashes: BlockHash[] = [];
    for (const block of this.blocks) if (block.hash !== null) hashes.push(block.hash);
    return hashes;
  }

  /** Cached blocks dropped from the prefix cache so their slot could be reused, over the pool's lifetime. */
  get evictedBlocks(): number {
    return this.numEvicted;
  }

  block(id: number): KVBlock {
    const block = this.blocks[id];
    if (block === undefined) throw new RangeError(`GPU block id ${id} is outside [0, ${this.numBlocks})`);
    return block;
  }

  /** Blocks allocation may take (free, including evictable cached ones). */
  get numFreeBlocks(): number {
    return this.freeQueue.length;
  }

  /** Takes `n` blocks from the head of the free queue, evicting cached ones; each gets refCnt 1. */
  allocate(n: number): KVBlock[] {
    if (n > this.freeQueue.length) {
      throw new Error(`cannot allocate ${n} blocks: only ${this.freeQueue.length} free`);
    }
    const out = new Array<KVBlock>(n);
    for (let i = 0; i < n; i++) {
      const block = this.freeQueue.popFront();
      if (block.hash !== null) this.evict(block);
      block.refCnt = 1;
      out[i] = block;
    }
    return out;
  }

  /** A request starts holding `blocks` (prefix hits): refCnt++, leaving the free queue. */
  touch(blocks: readonly KVBlock[]): void {
    for (const block of blocks) {
      if (block.refCnt === 0) this.freeQueue.remove(block);
      block.refCnt++;
    }
  }

  /** A request stops holding `blocks`; those no longer held join the free queue in the given order. */
  free(blocks: readonly KVBlock[]): void {
    for (const block of blocks) {
      if (block.refCnt <= 0) throw new Error(`block ${block.id} freed more often than it was held`);
      block.refCnt--;
      if (block.refCnt === 0) {
        if (block.hash === null) this.freeQueue.prepend(block);
        else this.freeQueue.append(block);
      }
    }
  }

  /**
   * Puts blocks[from, to) in the prefix cache under hashes[from, to). A block
   * already cached (a prefix hit) keeps its entry; a block whose hash another
   * block already holds stays anonymous.
   */
  cacheFullBlocks(blocks: readonly KVBlock[], hashes: readonly BlockHash[], from: number, to: number): void {
    for (let i = from; i < to; i++) this.cacheBlock(blocks[i], hashes[i], i);
  }

  /**
   * cacheFullBlocks for a block table given as block ids. With an event sink
   * and the request's `tokens`, each run of blocks that entered the cache is
   * reported as one stored chain (a hit or a hash another block holds ends a run).
   */
  cacheFullBlockIds(blockIds: readonly number[], hashes: readonly BlockHash[], from: number, to: number, tokens?: BlockTokens): void {
    const sink = this.eventSink;
    if (sink === null || tokens === undefined) {
      for (let i = from; i < to; i++) this.cacheBlock(this.block(blockIds[i]), hashes[i], i);
      return;
    }
    let runStart = -1;
    for (let i = from; i < to; i++) {
      if (this.cacheBlock(this.block(blockIds[i]), hashes[i], i)) {
        if (runStart < 0) runStart = i;
      } else if (runStart >= 0) {
        this.reportStored(sink, blockIds, hashes, runStart, i, tokens);
        runStart = -1;
      }
    }
    if (runStart >= 0) this.reportStored(sink, blockIds, hashes, runStart, to, tokens);
  }

  /**
   * The value words of a cached block's hash as a KV event carries them
   * ([high, low]), or null when the block is not cached or its hash is not
   * 16 hex digits (its lanes are a fingerprint).
   */
  hashWordsOf(blockId: number): [number, number] | null {
    this.block(blockId);
    if (this.hashIsValue[blockId] === 0) return null;
    return [this.hashWords[2 * blockId], this.hashWords[2 * blockId + 1]];
  }

  getCachedBlock(hash: BlockHash): KVBlock | null {
    const id = this.cachedByHash.get(blockHashLane(hash, 0), blockHashLane(hash, 1));
    if (id === ABSENT) return null;
    const block = this.blocks[id];
    return block.hash === hash ? block : null;
  }

  /** Marks a block as being written by in-flight load `jobId`. */
  markPending(block: KVBlock, jobId: number): void {
    if (block.pendingJob === null) this.numPending++;
    block.pendingJob = jobId;
  }

  /** The load writing `block` finished. */
  clearPending(block: KVBlock): void {
    if (block.pendingJob !== null) this.numPending--;
    block.pendingJob = null;
  }

  /** Drops these blocks' hashes (e.g. their load failed) so no request hits them again. Returns how many were cached. */
  removeFromPrefixCache(blockIds: Iterable<number>): number {
    let removed = 0;
    for (const id of blockIds) {
      const block = this.block(id);
      if (block.hash === null) continue;
      this.uncache(block);
      removed++;
    }
    return removed;
  }

  /** Drops every hash. Only legal when no block is held; returns false (and changes nothing) otherwise. */
  resetPrefixCache(): boolean {
    if (this.freeQueue.length !== this.numBlocks) return false;
    if (this.eventSink !== null) for (const block of this.blocks) if (block.hash !== null) this.eventSink.removed(block.hash);
    for (const block of this.blocks) block.hash = null;
    this.hashIsValue.fill(0);
    this.cachedByHash.clear();
    return true;
  }

  /** Every block back to free, unreferenced and uncached (the device contents were lost). */
  reset(): void {
    this.eventSink?.cleared();
    this.freeQueue.clear();
    this.cachedByHash.clear();
    this.hashIsValue.fill(0);
    this.numPending = 0;
    for (const block of this.blocks) {
      block.refCnt = 0;
      block.hash = null;
      block.pendingJob = null;
      block.prevFree = null;
      block.nextFree = null;
      block.inFreeQueue = false;
      this.freeQueue.append(block);
    }
  }

  counts(): BlockPoolCounts {
    return {
      free: this.freeQueue.length,
      cached: this.cachedByHash.size,
      referenced: this.numBlocks - this.freeQueue.length,
      pending: this.numPending,
    };
  }

  /** Block ids in free-queue order, head (next to be reused) first. */
  freeQueueOrder(): number[] {
    return Array.from(this.freeQueue, (b) => b.id);
  }

  /**
   * Internal invariants, for tests: every block is either held or in the free
   * queue exactly once, and the hash map and the blocks' hashes agree.
   * Returns the problems found (empty when consistent).
   */
  checkConsistency(): string[] {
    const problems: string[] = [];
    const seen = new Set<number>();
    for (const block of this.freeQueue) {
      if (seen.has(block.id)) problems.push(`block ${block.id} is in the free queue twice`);
      seen.add(block.id);
      if (block.refCnt !== 0) problems.push(`block ${block.id} is free but has refCnt ${block.refCnt}`);
      if (!block.inFreeQueue) problems.push(`block ${block.id} is linked in the free queue but not marked`);
    }
    if (seen.size !== this.freeQueue.length) {
      problems.push(`free queue holds ${seen.size} blocks but counts ${this.freeQueue.length}`);
    }
    let pending = 0;
    for (const block of this.blocks) {
      if (!seen.has(block.id) && block.refCnt <= 0) {
        problems.push(`block ${block.id} is neither free nor held (refCnt ${block.refCnt})`);
      }
      if (block.inFreeQueue && !seen.has(block.id)) problems.push(`block ${block.id} is marked free but unreachable`);
      if (block.hash !== null && this.getCachedBlock(block.hash) !== block) {
        problems.push(`block ${block.id} carries hash ${block.hash} but the index does not point at it`);
      }
      if (block.pendingJob !== null) {
        pending++;
        if (block.refCnt === 0) problems.push(`block ${block.id} is pending on job ${block.pendingJob} but free`);
      }
    }
    this.cachedByHash.forEach((a, b, id) => {
      const block = this.blocks[id];
      if (block === undefined || block.hash === null || blockHashLane(block.hash, 0) !== a || blockHashLane(block.hash, 1) !== b) {
        problems.push(`hash ${formatBlockHash(a, b)} maps to block ${id}, which carries ${block?.hash ?? null}`);
      }
    });
    if (pending !== this.numPending) problems.push(`${pending} pending blocks, counter says ${this.numPending}`);
    return problems;
  }

  /**
   * Caches `block` (table index `index`) under `hash`, unless it is cached already or the hash is taken.
   * Returns whether it entered the cache now.
   */
  private cacheBlock(block: KVBlock, hash: BlockHash, index: number): boolean {
    if (block.hash !== null) {
      if (block.hash !== hash) {
        throw new Error(`block ${block.id} at table index ${index} is cached as ${block.hash}, expected ${hash}`);
      }
      return false;
    }
    const high = blockHashLane(hash, 0);
    const low = blockHashLane(hash, 1);
    if (!this.cachedByHash.setIfAbsent(high, low, block.id)) return false;
    block.hash = hash;
    // The lanes just computed for the index: the event words, where they are the value.
    const id = block.id;
    this.hashWords[2 * id] = high;
    this.hashWords[2 * id + 1] = low;
    this.hashIsValue[id] = blockHashLanesAreValue(hash) ? 1 : 0;
    return true;
  }

  private evict(block: KVBlock): void {
    const hash = block.hash as BlockHash;
    // The observer sees the block while its contents are intact: this step's writes will overwrite them.
    this.evictionObserver?.(block.id, hash);
    this.numEvicted++;
    this.uncache(block);
  }

  /** Drops a cached block's index entry and hash. */
  private uncache(block: KVBlock): void {
    const hash = block.hash as BlockHash;
    this.cachedByHash.delete(blockHashLane(hash, 0), blockHashLane(hash, 1));
    block.hash = null;
    const id = block.id;
    const isValue = this.hashIsValue[id] === 1;
    this.hashIsValue[id] = 0;
    const sink = this.eventSink;
    if (sink === null) return;
    if (isValue && sink.removedWords !== undefined) sink.removedWords(hash, this.hashWords[2 * id], this.hashWords[2 * id + 1]);
    else sink.removed(hash);
  }

  /**
   * Reports table blocks [from, to), which just entered the prefix cache, as one stored chain: by range where the sink
   * copies it (no arrays built), with the words of their hashes and their parent's where the pool keeps them; else as
   * arrays of their own.
   */
  private reportStored(sink: TierEventSink, blockIds: readonly number[], hashes: readonly BlockHash[], from: number, to: number, tokens: BlockTokens): void {
    if (sink.storedRun === undefined) {
      const run = storedRunArrays(hashes, from, to, tokens, sink.blockSize);
      sink.stored(run.hashes, run.parent, run.tokenIds);
      return;
    }
    sink.storedRun(hashes, from, to, tokens, this.runHashWords(blockIds, hashes, from, to));
  }

  /** The words of hashes[from - 1 .. to) (the parent's pair zeros at 0) from the blocks that hold them, or undefined where a block does not hold its hash's value. */
  private runHashWords(blockIds: readonly number[], hashes: readonly BlockHash[], from: number, to: number): HashWords | undefined {
    const need = 2 * (to - from + 1);
    if (this.runWords.length < need) this.runWords = new Int32Array(Math.max(need, 2 * this.runWords.length));
    const run = this.runWords;
    const words = this.hashWords;
    const isValue = this.hashIsValue;
    if (from === 0) {
      run[0] = 0;
      run[1] = 0;
    } else {
      // The parent's block holds its words only where it is the block cached under that hash (not an anonymous twin).
      const id = blockIds[from - 1];
      if (isValue[id] === 0 || this.blocks[id].hash !== hashes[from - 1]) return undefined;
      run[0] = words[2 * id];
      run[1] = words[2 * id + 1];
    }
    for (let i = from, k = 2; i < to; i++, k += 2) {
      const id = blockIds[i];
      if (isValue[id] === 0) return undefined;
      run[k] = words[2 * id];
      run[k + 1] = words[2 * id + 1];
    }
    return run;
  }
}
