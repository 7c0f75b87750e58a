import type { OffloadBlockAccesses } from './offload-blocks.js';

/**
 * Belady's MIN replacement over offloaded-block accesses, counting prefix
 * hits. Requests are replayed in arrival order against a cache of
 * `capacityBlocks` blocks:
 *   - a request's hit is the longest prefix of its blocks that is resident
 *     (prefix caching: a block after a miss is recomputed anyway);
 *   - then all its full blocks are resident (stored once computed), and while
 *     the cache is over capacity the block whose next use is farthest away is
 *     evicted (never-used-again first; among equal next uses, the deepest
 *     block, since the next request needs the shallow ones for its prefix).
 * MIN is optimal for independent block hits; with prefix-constrained hits it
 * is a strong heuristic rather than a proven optimum.
 *
 * The whole-prompt case follows the engine: the last prompt token is always
 * computed, so a request hits at most promptTokens - 1 tokens.
 */

export interface PrefixHitResult {
  /** Offloaded blocks served from the cache. */
  readonly hitBlocks: number;
  /** Prompt tokens served from the cache. */
  readonly hitTokens: number;
}

const NEVER = 2 ** 31 - 1;

/**
 * Request index of each access's next use of the same block (NEVER when the
 * block is not used again). Blocks are unique within a request, so the next
 * use is always in a later request.
 */
function nextUses(accesses: OffloadBlockAccesses): Int32Array {
  const { blocks, starts, uniqueBlocks } = accesses;
  const next = new Int32Array(blocks.length);
  const upcoming = new Int32Array(uniqueBlocks).fill(NEVER);
  for (let i = starts.length - 2; i >= 0; i--) {
    for (let t = starts[i]; t < starts[i + 1]; t++) {
      next[t] = upcoming[blocks[t]];
      upcoming[blocks[t]] = i;
    }
  }
  return next;
}

/** Hit tokens of request `i` whose first `hitBlocks` blocks hit. */
function hitTokensOf(accesses: OffloadBlockAccesses, i: number, hitBlocks: number): number {
  return Math.min(hitBlocks * accesses.blockTokens, accesses.promptTokens[i] - 1);
}

/** Prefix hits with a cache that never evicts. */
export function simulateUnboundedCache(accesses: OffloadBlockAccesses): PrefixHitResult {
  const { blocks, starts } = accesses;
  const seen = new Uint8Array(accesses.uniqueBlocks);
  let hitBlocks = 0;
  let hitTokens = 0;
  for (let i = 0; i + 1 < starts.length; i++) {
    let t = starts[i];
    while (t < starts[i + 1] && seen[blocks[t]] === 1) t++;
    hitBlocks += t - starts[i];
    hitTokens += hitTokensOf(accesses, i, t - starts[i]);
    for (let u = starts[i]; u < starts[i + 1]; u++) seen[blocks[u]] = 1;
  }
  return { hitBlocks, hitTokens };
}

/** Prefix hits of Belady's MIN with room for `capacityBlocks` blocks. */
export function simulateBelady(accesses: OffloadBlockAccesses, capacityBlocks: number): PrefixHitResult {
  if (capacityBlocks >= accesses.uniqueBlocks) return simulateUnboundedCache(accesses);
  const { blocks, starts, depth } = accesses;
  const next = nextUses(accesses);
  const cache = new MinResidency(accesses.uniqueBlocks, blocks.length);
  let hitBlocks = 0;
  let hitTokens = 0;
  for (let i = 0; i + 1 < starts.length; i++) {
    let t = starts[i];
    while (t < starts[i + 1] && cache.has(blocks[t])) t++;
    hitBlocks += t - starts[i];
    hitTokens += hitTokensOf(accesses, i, t - starts[i]);
    for (let u = starts[i]; u < starts[i + 1]; u++) cache.put(blocks[u], minPriority(next[u], depth[blocks[u]]));
    cache.evictDownTo(capacityBlocks);
  }
  return { hitBlocks, hitTokens };
}

/** Priority packing: depth takes the low 21 bits (next use and depth are both < 2^31, the product < 2^53). */
const DEPTH_SPAN = 2 ** 21;

/**
 * MIN's eviction priority of a block (larger leaves first): its next use
 * first, then its depth, since a prefix hit needs the shallow blocks.
 */
export function minPriority(nextUse: number, depth: number): number {
  return nextUse * DEPTH_SPAN + Math.min(depth, DEPTH_SPAN - 1);
}

/**
 * The resident blocks of a MIN cache: each block's latest eviction priority
 * in a max-heap, whose older entries for the block are stale and skipped
 * when they come up.
 */
export class MinResidency {
  private readonly resident: Uint8Array;
  /** Priority of each resident block's latest entry. */
  private readonly currentPriority: Float64Array;
  private readonly heap: MaxHeap;
  private size = 0;

  /** `maxEntries`: how many times put() may be called in all. */
  constructor(uniqueBlocks: number, maxEntries: number) {
    this.resident = new Uint8Array(uniqueBlocks);
    this.currentPriority = new Float64Array(uniqueBlocks);
    this.heap = new MaxHeap(maxEntries);
  }

  has(block: number): boolean {
    return this.resident[block] === 1;
  }

  /** Makes `block` resident, or keeps it so, with eviction priority `priority`. */
  put(block: number, priority: number): void {
    if (this.resident[block] === 0) {
      this.resident[block] = 1;
      this.size++;
    }
    this.currentPriority[block] = priority;
    this.heap.push(priority, block);
  }

  /** Makes `block` not resident (its heap entries go stale). */
  remove(block: number): void {
    if (this.resident[block] === 0) return;
    this.resident[block] = 0;
    this.size--;
  }

  /** Evicts the highest-priority blocks until at most `capacityBlocks` are resident. */
  evictDownTo(capacityBlocks: number): void {
    const { heap, resident, currentPriority } = this;
    while (this.size > capacityBlocks) {
      const block = heap.popBlock();
      if (resident[block] === 1 && heap.lastKey === currentPriority[block]) {
        resident[block] = 0;
        this.size--;
      }
    }
  }
}

/** A max-heap of (key, block) pairs in typed arrays; stale entries are skipped by the caller. */
class MaxHeap {
  private readonly keys: Float64Array;
  private readonly values: Int32Array;
  private length = 0;
  /** Key of the entry popBlock() returned last. */
  lastKey = 0;

  constructor(capacity: number) {
    this.keys = new Float64Array(capacity);
    this.values = new Int32Array(capacity);
  }

  push(key: number, value: number): void {
    const { keys, values } = this;
    let i = this.length++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (keys[parent] >= key) break;
      keys[i] = keys[parent];
      values[i] = values[parent];
      i = parent;
    }
    keys[i] = key;
    values[i] = value;
  }

  popBlock(): number {
    const { keys, values } = this;
    if (this.length === 0) throw new Error('MaxHeap.popBlock on an empty heap');
    const topValue = values[0];
    this.lastKey = keys[0];
    const n = --this.length;
    const key = keys[n];
    const value = values[n];
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && keys[child + 1] > keys[child]) child++;
      if (keys[child] <= key) break;
      keys[i] = keys[child];
      values[i] = values[child];
      i = child;
    }
    keys[i] = key;
    values[i] = value;
    return topValue;
  }
}
