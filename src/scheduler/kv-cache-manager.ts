import { BlockPool, type BlockPoolCounts } from './block-pool.js';
import type { KVBlock } from './kv-block.js';
import type { Request } from './request.js';

/**
 * Maps requests to GPU blocks: prefix-cache lookups, slot allocation, block
 * tables, and the bookkeeping of blocks that in-flight loads are writing.
 */

export interface KVCacheManagerOptions {
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly enablePrefixCaching: boolean;
}

/** A request's prefix hit in the GPU cache. */
export interface ComputedBlocks {
  readonly blocks: readonly KVBlock[];
  readonly numComputedTokens: number;
  /** Load jobs still writing some of the hit blocks: the request must wait for them. */
  readonly pendingJobs: ReadonlySet<number>;
}

export interface AllocateSlotsOptions {
  /** Tokens of `newComputedBlocks` (a prefix hit found by getComputedBlocks). */
  readonly numNewComputedTokens?: number;
  readonly newComputedBlocks?: readonly KVBlock[];
  /** Tokens a connector provides (loaded into the blocks allocated here). */
  readonly numExternalComputedTokens?: number;
  /** Tokens to reserve blocks for beyond this step's, without caching them (they are not computed yet). */
  readonly numLookaheadTokens?: number;
}

export interface KVCacheUsage extends BlockPoolCounts {
  readonly total: number;
  /** Fraction of blocks held by requests. */
  readonly usage: number;
}

/**
 * One request's block table. The request carries it (`Request.blockTable`),
 * so the decode path reaches it without a map lookup; `owner` tells which
 * manager it belongs to.
 */
export class BlockTable {
  /** GPU block ids in table order: handed to the workers and the connector as they are. */
  readonly ids: number[] = [];
  /** Leading blocks of the table already offered to the prefix cache. */
  numCachedBlocks = 0;

  constructor(readonly owner: KVCacheManager) {}
}

const NO_BLOCKS: readonly KVBlock[] = Object.freeze([]);
const NO_IDS: readonly number[] = Object.freeze([]);
const NO_JOBS: ReadonlySet<number> = new Set<number>();

export class KVCacheManager {
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
  readonly pool: BlockPool;
  /** Requests holding blocks (their tables hang off the requests themselves). */
  private readonly holders = new Set<Request>();
  private readonly loadingBlocks = new Map<number, KVBlock[]>();

  constructor(options: KVCacheManagerOptions) {
    this.blockSize = options.blockSize;
    this.enablePrefixCaching = options.enablePrefixCaching;
    this.pool = new BlockPool(options.numGpuBlocks);
  }

  /**
   * The longest run of cached blocks matching the request's hashes from the
   * start, capped so the last token is always computed (its logits are needed).
   */
  getComputedBlocks(request: Request): ComputedBlocks {
    if (!this.enablePrefixCaching) return { blocks: NO_BLOCKS, numComputedTokens: 0, pendingJobs: NO_JOBS };
    const maxBlocks = Math.min(Math.floor((request.numTokens - 1) / this.blockSize), request.blockHashes.length);
    const blocks: KVBlock[] = [];
    let pendingJobs: Set<number> | null = null;
    for (let i = 0; i < maxBlocks; i++) {
      const block = this.pool.getCachedBlock(request.blockHashes[i]);
      if (block === null) break;
      blocks.push(block);
      if (block.pendingJob !== null) (pendingJobs ??= new Set()).add(block.pendingJob);
    }
    return { blocks, numComputedTokens: blocks.length * this.blockSize, pendingJobs: pendingJobs ?? NO_JOBS };
  }

  /**
   * Gives the request blocks for its computed tokens (prefix hits, external
   * tokens) and `numNewTokens` more. Returns the ids of newly allocated blocks,
   * or null when there are not enough free blocks (nothing changes then).
   * Full blocks up to the end of this step's tokens enter the prefix cache now:
   * this step's forward writes them before any later step reads them.
   */
  allocateSlots(request: Request, numNewTokens: number, options?: AllocateSlotsOptions): readonly number[] | null {
    let entry = this.tableOf(request);
    // Decode fast path: the step's tokens fit the blocks held and complete no block, so nothing changes.
    if (options === undefined && entry !== undefined) {
      const numCacheable = request.numComputedTokens + numNewTokens;
      if (numCacheable <= entry.ids.length * this.blockSize && !this.completesCacheableBlock(request, entry, numCacheable)) {
        return NO_IDS;
      }
    }
    const newComputedBlocks = options?.newComputedBlocks ?? NO_BLOCKS;
    const numNewComputed = options?.numNewComputedTokens ?? 0;
    const numExternal = options?.numExternalComputedTokens ?? 0;
    const numLookahead = options?.numLookaheadTokens ?? 0;
    const numHeld = entry === undefined ? 0 : entry.ids.length;

    const numComputed = request.numComputedTokens + numNewComputed;
    const numCacheable = numComputed + numExternal + numNewTokens;
    const numBlocksNeeded = Math.ceil((numCacheable + numLookahead) / this.blockSize);
    const numNewBlocks = Math.max(0, numBlocksNeeded - numHeld - newComputedBlocks.length);

    // Touching a free cached hit takes it out of the free queue too.
    let numFreeHits = 0;
    for (let i = 0; i < newComputedBlocks.length; i++) if (newComputedBlocks[i].refCnt === 0) numFreeHits++;
    if (numNewBlocks + numFreeHits > this.pool.numFreeBlocks) return null;

    if (entry === undefined) {
      entry = new BlockTable(this);
      request.blockTable = entry;
      this.holders.add(request);
    }
    if (newComputedBlocks.length > 0) {
      this.pool.touch(newComputedBlocks);
      for (let i = 0; i < newComputedBlocks.length; i++) entry.ids.push(newComputedBlocks[i].id);
    }
    let newIds: readonly number[] = NO_IDS;
    if (numNewBlocks > 0) {
      const allocated = this.pool.allocate(numNewBlocks);
      const ids = new Array<number>(numNewBlocks);
      for (let i = 0; i < numNewBlocks; i++) {
        entry.ids.push(allocated[i].id);
        ids[i] = allocated[i].id;
      }
      newIds = ids;
    }

    if (this.enablePrefixCaching) {
      const numFull = this.numCacheableBlocks(request, numCacheable);
      if (numFull > entry.numCachedBlocks) {
        this.pool.cacheFullBlockIds(entry.ids, request.blockHashes, entry.numCachedBlocks, numFull, request);
        entry.numCachedBlocks = numFull;
      }
    }
    return newIds;
  }

  /** Full blocks, up to `numCacheable` tokens, that may enter the prefix cache (only tokens already hashed count). */
  private numCacheableBlocks(request: Request, numCacheable: number): number {
    return Math.min(Math.floor(Math.min(numCacheable, request.numTokens) / this.blockSize), request.blockHashes.length);
  }

  private completesCacheableBlock(request: Request, entry: BlockTable, numCacheable: number): boolean {
    return this.enablePrefixCaching && this.numCacheableBlocks(request, numCacheable) > entry.numCachedBlocks;
  }

  /** Table blocks [first, first + n) of the request are being written by load `jobId`. */
  markLoading(request: Request, firstBlockIndex: number, numBlocks: number, jobId: number): void {
    const entry = this.tableOf(request);
    if (entry === undefined || firstBlockIndex < 0 || firstBlockIndex + numBlocks > entry.ids.length) {
      throw new RangeError(
        `markLoading: request '${request.id}' holds ${entry?.ids.length ?? 0} blocks; ` +
          `cannot mark [${firstBlockIndex}, ${firstBlockIndex + numBlocks}) as loading`,
      );
    }
    const blocks = entry.ids.slice(firstBlockIndex, firstBlockIndex + numBlocks).map((id) => this.pool.block(id));
    for (const block of blocks) this.pool.markPending(block, jobId);
    const existing = this.loadingBlocks.get(jobId);
    if (existing === undefined) this.loadingBlocks.set(jobId, blocks);
    else existing.push(...blocks);
  }

  /** Load `jobId` finished: its ok blocks become ordinary cached blocks, its failed blocks leave the prefix cache. */
  completeLoading(jobId: number, failedBlockIds: Iterable<number>): void {
    const blocks = this.loadingBlocks.get(jobId);
    if (blocks === undefined) return;
    this.loadingBlocks.delete(jobId);
    for (const block of blocks) if (block.pendingJob === jobId) this.pool.clearPending(block);
    this.pool.removeFromPrefixCache(failedBlockIds);
  }

  /** Releases the request's blocks, last block first, so its prefix stays cached longest. */
  free(request: Request): void {
    const entry = this.tableOf(request);
    if (entry === undefined) return;
    this.detach(request);
    const ids = entry.ids;
    const reversed = new Array<KVBlock>(ids.length);
    for (let i = 0; i < ids.length; i++) reversed[i] = this.pool.block(ids[ids.length - 1 - i]);
    this.pool.free(reversed);
  }

  hasBlocks(request: Request): boolean {
    return this.tableOf(request) !== undefined;
  }

  numBlocksOf(request: Request): number {
    return this.tableOf(request)?.ids.length ?? 0;
  }

  /** A copy of the request's block table. */
  getBlockIds(request: Request): number[] {
    return this.tableOf(request)?.ids.slice() ?? [];
  }

  /** The request's block table itself: valid while the request holds its blocks; copy it to keep it. */
  blockIdsView(request: Request): readonly number[] {
    return this.tableOf(request)?.ids ?? NO_IDS;
  }

  /**
   * Index of the first table block (among the first `numBlocks`) whose id is
   * in `blockIds`, or -1.
   */
  firstBlockIndexIn(request: Request, blockIds: ReadonlySet<number>, numBlocks: number): number {
    const entry = this.tableOf(request);
    if (entry === undefined) return -1;
    const n = Math.min(numBlocks, entry.ids.length);
    for (let i = 0; i < n; i++) if (blockIds.has(entry.ids[i])) return i;
    return -1;
  }

  /**
   * The request's tokens from table block `blockIndex` on will be recomputed:
   * offer those blocks to the prefix cache again once they are.
   */
  recacheFrom(request: Request, blockIndex: number): void {
    const entry = this.tableOf(request);
    if (entry !== undefined && entry.numCachedBlocks > blockIndex) entry.numCachedBlocks = blockIndex;
  }

  removeFromPrefixCache(blockIds: Iterable<number>): number {
    return this.pool.removeFromPrefixCache(blockIds);
  }

  /** Forgets every table, load and cached block: the device contents were lost. */
  reset(): void {
    for (const request of this.holders) if (request.blockTable?.owner === this) request.blockTable = null;
    this.holders.clear();
    this.loadingBlocks.clear();
    this.pool.reset();
  }

  /** Number of requests holding blocks. */
  get numTables(): number {
    return this.holders.size;
  }

  /** The request's table in this manager, if it holds blocks here. */
  private tableOf(request: Request): BlockTable | undefined {
    const table = request.blockTable;
    return table !== null && table.owner === this ? table : undefined;
  }

  private detach(request: Request): void {
    this.holders.delete(request);
    request.blockTable = null;
  }

  usage(): KVCacheUsage {
    const counts = this.pool.counts();
    return { ...counts, total: this.pool.numBlocks, usage: counts.referenced / this.pool.numBlocks };
  }
}
