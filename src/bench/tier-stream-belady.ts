import { MinResidency, minPriority, type PrefixHitResult } from '../analysis/belady.js';
import type { TierLookup, TierStream } from './tier-stream.js';

/**
 * What a CPU tier behind the GPU tier can hit, over the stream it sees in one
 * replay (tier-stream.ts): the bound at a capacity and the unbounded ceiling.
 *
 * Both count a request's reuse once. A lookup at readmission after a
 * preemption reads what the request was served or computed itself before, so
 * it is neither a hit nor a reason to keep a block. A hit is the run of
 * resident blocks from the lookup's first one, in tokens past the GPU hit,
 * and never the request's last token (always computed).
 */

/** A lookup whose hits count: the request's first admission. */
function counts(lookup: TierLookup): boolean {
  return !lookup.readmission;
}

function lookupHitTokens(lookup: TierLookup, hitBlocks: number, blockTokens: number): number {
  return hitBlocks === 0 ? 0 : Math.min(hitBlocks * blockTokens - lookup.coveredTokens, lookup.maxHitTokens);
}

/**
 * Belady's MIN with bypass at `capacityBlocks` offloaded blocks. A block may
 * enter the tier only when offered (the request computed it on the GPU), and
 * is kept only for its next lookup:
 *   - when offered, or looked up while resident, a block that is never
 *     looked up again, or is offered again before its next lookup, is not
 *     held (holding it meanwhile only takes room);
 *   - while the tier is over capacity, the block whose next lookup is
 *     farthest leaves, so an offered block used after every held one is not
 *     admitted; among equal next lookups the deepest leaves first, since a
 *     prefix hit needs the shallow ones.
 * MIN is optimal for independent block hits; with prefix-constrained hits,
 * and blocks written only when offered, it is a strong heuristic rather than
 * a proven optimum (tierStreamProvenBound is proven). It never exceeds the
 * ceiling (tierStreamCeiling): it holds only offered blocks.
 */
export function tierStreamBound(stream: TierStream, capacityBlocks: number): PrefixHitResult {
  return simulateMin(stream, capacityBlocks, false);
}

/**
 * A bound no policy exceeds, proven: MIN with bypass counting every
 * looked-up block it holds, prefix or not, in whole blocks, when a block
 * offered once may be written again at any later lookup too. Every access
 * can then load, the block hits are independent, and MIN is optimal for
 * them; a policy's prefix hits, with writes only when offered, are among
 * them. Capped by the ceiling, which bounds every policy as well.
 */
export function tierStreamProvenBound(stream: TierStream, capacityBlocks: number): PrefixHitResult {
  const relaxed = simulateMin(stream, capacityBlocks, true);
  const ceiling = tierStreamCeiling(stream);
  return relaxed.hitTokens <= ceiling.hitTokens ? relaxed : ceiling;
}

/**
 * MIN with bypass over the stream. `relaxed`: a looked-up block offered
 * before may enter the tier at the lookup, and every resident looked-up
 * block counts (not only the run from the first one).
 */
function simulateMin(stream: TierStream, capacityBlocks: number, relaxed: boolean): PrefixHitResult {
  const { events, uniqueBlocks, blockTokens } = stream;
  const hold = holdPriorities(stream);
  let puts = 0;
  for (const priorities of hold) puts += priorities.length;
  const cache = new MinResidency(uniqueBlocks, Math.max(1, puts));
  const offered = new Uint8Array(relaxed ? uniqueBlocks : 0);
  let hitBlocks = 0;
  let hitTokens = 0;

  for (let e = 0; e < events.length; e++) {
    const event = events[e];
    const { blocks } = event;
    const priorities = hold[e];
    if (event.kind === 'lookup') {
      if (!counts(event)) continue;
      let h = 0;
      while (h < blocks.length && cache.has(blocks[h])) h++;
      if (relaxed) {
        // Whole blocks: the most tokens any h blocks can serve, wherever they are.
        let resident = h;
        for (let j = h; j < blocks.length; j++) if (cache.has(blocks[j])) resident++;
        hitBlocks += resident;
        hitTokens += resident * blockTokens;
      } else {
        hitBlocks += h;
        hitTokens += lookupHitTokens(event, h, blockTokens);
      }
      for (let j = 0; j < blocks.length; j++) {
        const b = blocks[j];
        if (!cache.has(b) && !(relaxed && offered[b] === 1)) continue;
        if (priorities[j] < 0) cache.remove(b);
        else cache.put(b, priorities[j]);
      }
      if (relaxed) cache.evictDownTo(capacityBlocks);
      continue;
    }
    for (let j = 0; j < blocks.length; j++) {
      if (relaxed) offered[blocks[j]] = 1;
      if (priorities[j] < 0) cache.remove(blocks[j]);
      else cache.put(blocks[j], priorities[j]);
    }
    cache.evictDownTo(capacityBlocks);
  }
  return { hitBlocks, hitTokens };
}

/**
 * An unbounded tier over the same stream: every block offered before and
 * looked up again hits (the run from the lookup's first block).
 */
export function tierStreamCeiling(stream: TierStream): PrefixHitResult {
  const stored = new Uint8Array(stream.uniqueBlocks);
  let hitBlocks = 0;
  let hitTokens = 0;
  for (const event of stream.events) {
    const { blocks } = event;
    if (event.kind === 'offer') {
      for (let j = 0; j < blocks.length; j++) stored[blocks[j]] = 1;
      continue;
    }
    if (!counts(event)) continue;
    let h = 0;
    while (h < blocks.length && stored[blocks[h]] === 1) h++;
    hitBlocks += h;
    hitTokens += lookupHitTokens(event, h, stream.blockTokens);
  }
  return { hitBlocks, hitTokens };
}

const NEVER = 2 ** 31 - 1;

/**
 * For each block of each event (empty for lookups that do not count): the
 * MIN priority to hold it with after the event, from its next counted
 * lookup and its depth there, or -1 when it is not worth holding (no next
 * lookup, or an offer comes first). One backward pass.
 */
function holdPriorities(stream: TierStream): Float64Array[] {
  const { events, uniqueBlocks } = stream;
  const nextLookup = new Int32Array(uniqueBlocks).fill(NEVER);
  const depthThere = new Int32Array(uniqueBlocks);
  const nextOffer = new Int32Array(uniqueBlocks).fill(NEVER);
  const out = new Array<Float64Array>(events.length);
  for (let e = events.length - 1; e >= 0; e--) {
    const event = events[e];
    const { blocks } = event;
    if (event.kind === 'lookup' && !counts(event)) {
      out[e] = new Float64Array(0);
      continue;
    }
    const priorities = new Float64Array(blocks.length);
    for (let j = 0; j < blocks.length; j++) {
      const b = blocks[j];
      const use = nextLookup[b];
      priorities[j] = use === NEVER || nextOffer[b] < use ? -1 : minPriority(use, depthThere[b]);
    }
    if (event.kind === 'lookup') {
      for (let j = 0; j < blocks.length; j++) {
        nextLookup[blocks[j]] = e;
        depthThere[blocks[j]] = event.firstDepth + j;
      }
    } else {
      for (let j = 0; j < blocks.length; j++) nextOffer[blocks[j]] = e;
    }
    out[e] = priorities;
  }
  return out;
}
