import type { BlockHash } from '../core/block-hash.js';

/** One GPU KV block as the block pool tracks it. */
export class KVBlock {
  readonly id: number;
  /** Requests holding the block. 0: the block sits in the free queue (possibly still cached). */
  refCnt = 0;
  /** Hash of the full block's tokens while the block is in the prefix cache, else null. */
  hash: BlockHash | null = null;
  /** The in-flight load job writing this block, or null once its contents are in place. */
  pendingJob: number | null = null;

  /** Free-queue links, owned by FreeBlockQueue. */
  prevFree: KVBlock | null = null;
  nextFree: KVBlock | null = null;
  inFreeQueue = false;

  constructor(id: number) {
    this.id = id;
  }
}
