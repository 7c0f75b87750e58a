import type { OffloadBlockAccesses } from './offload-blocks.js';

/**
 * Reuse distances of offloaded blocks: for each access to a block seen
 * before, the number of distinct other blocks accessed since its previous
 * access (LRU stack distance). An LRU cache of C blocks, ignoring the prefix
 * rule, hits exactly the reuses with distance < C.
 *
 * Computed in O(n log n) with a Fenwick tree over access positions that marks
 * each block's latest access.
 */
export interface ReuseDistances {
  /** Accesses to a block seen before. */
  readonly reuses: number;
  /** counts[d] = reuses at distance d (d < uniqueBlocks). */
  readonly counts: Float64Array;
}

export function reuseDistances(accesses: OffloadBlockAccesses): ReuseDistances {
  const { blocks, uniqueBlocks } = accesses;
  const n = blocks.length;
  const tree = new Int32Array(n + 1);
  const lastAccess = new Int32Array(uniqueBlocks).fill(-1);
  const counts = new Float64Array(Math.max(1, uniqueBlocks));
  let distinctSeen = 0;
  let reuses = 0;
  for (let t = 0; t < n; t++) {
    const block = blocks[t];
    const last = lastAccess[block];
    if (last >= 0) {
      // Marks sit on each seen block's latest access, all before t: those after `last` are the distance.
      let upToLast = 0;
      for (let i = last + 1; i > 0; i -= i & -i) upToLast += tree[i];
      counts[distinctSeen - upToLast]++;
      reuses++;
      for (let i = last + 1; i <= n; i += i & -i) tree[i]--;
    } else {
      distinctSeen++;
    }
    for (let i = t + 1; i <= n; i += i & -i) tree[i]++;
    lastAccess[block] = t;
  }
  return { reuses, counts };
}

/** The p-th percentile (nearest rank) of the distances. */
export function distancePercentile(distances: ReuseDistances, p: number): number | null {
  if (distances.reuses === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * distances.reuses));
  let seen = 0;
  for (let d = 0; d < distances.counts.length; d++) {
    seen += distances.counts[d];
    if (seen >= rank) return d;
  }
  return distances.counts.length - 1;
}

/** Reuses at distance < capacity. */
export function reusesWithin(distances: ReuseDistances, capacity: number): number {
  let total = 0;
  const end = Math.min(capacity, distances.counts.length);
  for (let d = 0; d < end; d++) total += distances.counts[d];
  return total;
}
