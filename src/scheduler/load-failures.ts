import type { KVCacheManager } from './kv-cache-manager.js';
import type { Request } from './request.js';

/** A request whose computed tokens rest on a block whose load failed. */
export interface InvalidBlockUse {
  readonly request: Request;
  /** Index in the request's block table of the first invalid block it computed through. */
  readonly blockIndex: number;
  /** That block's GPU id. */
  readonly blockId: number;
  /** Computed tokens the request keeps: everything before that block. */
  readonly validTokens: number;
}

/**
 * Finds every request among `candidates` whose computed tokens include a
 * block of `invalidBlockIds`: requests waiting for their own load (async), and
 * running requests reading the block (sync use, including requests that share
 * it through the prefix cache). The lowest invalid block of a table wins.
 */
export function findInvalidBlockUses(
  candidates: Iterable<Request>,
  invalidBlockIds: ReadonlySet<number>,
  kvCacheManager: KVCacheManager,
): InvalidBlockUse[] {
  const uses: InvalidBlockUse[] = [];
  const blockSize = kvCacheManager.blockSize;
  for (const request of candidates) {
    if (request.numComputedTokens === 0 || !kvCacheManager.hasBlocks(request)) continue;
    const numComputedBlocks = Math.ceil(request.numComputedTokens / blockSize);
    const blockIndex = kvCacheManager.firstBlockIndexIn(request, invalidBlockIds, numComputedBlocks);
    if (blockIndex < 0) continue;
    const blockId = kvCacheManager.blockIdsView(request)[blockIndex];
    uses.push({ request, blockIndex, blockId, validTokens: blockIndex * blockSize });
  }
  return uses;
}
