import { MinResidency, minPriority, type PrefixHitResult } from '../analysis/belady.js';
import type { TierStream } from './tier-stream.js';

/**
 * Belady's MIN over the stream the CPU tier sees behind the GPU tier
 * (tier-stream.ts), with room for `capacityBlocks` offloaded blocks:
 *   - a lookup hits the longest run of its blocks, from its first, that is
 *     resident, and serves those blocks' tokens past the GPU hit (as the
 *     connector counts a load);
 *   - an offered block may enter the tier; while the tier is over capacity,
 *     the block whose next lookup is farthest away leaves (a block never
 *     looked up again first, so a useless offer is not kept; among equal next
 *     uses, the deepest block, since a prefix hit needs the shallow ones).
 * As for the whole-trace figure (belady.ts), MIN is optimal for independent
 * block hits and a strong heuristic with prefix-constrained hits.
 */
export function simulateTierStreamBelady(stream: TierStream, capacityBlocks: number): PrefixHitResult {
  const { events, uniqueBlocks, blockTokens } = stream;
  const NEVER = 2 ** 31 - 1;
  // Next lookup (event index) of each block after each event that names it: one backward pass.
  const nextUse: Int32Array[] = new Array<Int32Array>(events.length);
  const upcoming = new Int32Array(uniqueBlocks).fill(NEVER);
  for (let e = events.length - 1; e >= 0; e--) {
    const { blocks } = events[e];
    const next = new Int32Array(blocks.length);
    for (let j = 0; j < blocks.length; j++) next[j] = upcoming[blocks[j]];
    if (events[e].kind === 'lookup') for (let j = 0; j < blocks.length; j++) upcoming[blocks[j]] = e;
    nextUse[e] = next;
  }

  const depth = new Int32Array(uniqueBlocks);
  let puts = 0;
  for (const event of events) puts += event.blocks.length;
  const cache = new MinResidency(uniqueBlocks, puts);
  let hitBlocks = 0;
  let hitTokens = 0;

  for (let e = 0; e < events.length; e++) {
    const event = events[e];
    const { blocks } = event;
    const next = nextUse[e];
    if (event.kind === 'lookup') {
      for (let j = 0; j < blocks.length; j++) depth[blocks[j]] = event.firstDepth + j;
      let h = 0;
      while (h < blocks.length && cache.has(blocks[h])) h++;
      if (h > 0) {
        hitBlocks += h;
        hitTokens += h * blockTokens - event.coveredTokens;
      }
      for (let j = 0; j < blocks.length; j++) if (cache.has(blocks[j])) cache.put(blocks[j], minPriority(next[j], depth[blocks[j]]));
      continue;
    }
    for (let j = 0; j < blocks.length; j++) if (!cache.has(blocks[j])) cache.put(blocks[j], minPriority(next[j], depth[blocks[j]]));
    cache.evictDownTo(capacityBlocks);
  }
  return { hitBlocks, hitTokens };
}
