import type { BlockHash } from '../../core/block-hash.js';
import type { StepView } from '../../scheduler/connector-port.js';
import type { Request } from '../../scheduler/request.js';
import { offloadKeyOf } from '../geometry.js';
import type { OffloadGeometry, StoreCandidate, StoreContext, StorePolicy } from './store-policy.js';

/**
 * Store on compute (the default): every full offloaded block is offered to
 * the tier once this step's forward has computed it. Each request keeps a
 * mark, the first offloaded block not yet stored; a step offers [mark, end)
 * in one store job and the mark advances over the blocks the manager stored
 * or already held, stopping at the first one it declined (offered again next
 * step). When the manager has no room at all the mark stays and the whole
 * range is offered again next step.
 *
 * `reuse:K` is this policy over a reuse-filtering manager: the manager
 * declines blocks seen fewer than K times, so they stay below the mark and
 * are offered again each step until they qualify or the request ends.
 */
export class StoreOnComputePolicy implements StorePolicy {
  readonly name = 'on-compute';
  /** Request id -> index of its first offloaded block not yet stored (absent: 0). */
  private readonly nextToStore = new Map<string, number>();
  /**
   * Requests whose mark stayed behind their computed blocks at their last
   * offer (refused for room, or a block declined). Every other request had
   * all its computed blocks offered and accepted, so a step in which it
   * completes no block has nothing to offer and its mark is not looked up.
   */
  private readonly behind = new Set<string>();
  /** The candidates of the offer being made, refilled for every offer: the context reads them only while it stores. */
  private readonly offer = new OfferBuffer();

  constructor(private readonly geometry: OffloadGeometry) {}

  storesFor(step: StepView, context: StoreContext): void {
    const { offloadFactor: f, offloadedBlockTokens } = this.geometry;
    // An index loop: it runs over every scheduled request every step, and allocates no iterator results.
    const scheduled = step.scheduled;
    for (let v = 0; v < scheduled.length; v++) {
      const view = scheduled[v];
      const request = view.request;
      // Tokens whose KV exists once this step's forward ran; a block one token short is not full.
      const computed = Math.min(request.numComputedTokens, request.numTokens);
      const end = Math.floor(computed / offloadedBlockTokens);
      // A request's first view after it was (re)admitted is fresh; later ones follow an offer of everything
      // computed up to the previous step (within one token: the sampled one).
      if (!view.fresh && (this.behind.size === 0 || !this.behind.has(request.id))) {
        const before = Math.min(request.numComputedTokens - view.numScheduledTokens, request.numTokens - 1);
        if (Math.floor(before / offloadedBlockTokens) >= end) continue;
      }
      const start = this.nextToStore.get(request.id) ?? 0;
      if (end <= start) {
        if (this.behind.size > 0) this.behind.delete(request.id);
        continue;
      }

      const candidates = this.offer.fill(end - start, f);
      for (let i = start; i < end; i++) {
        const candidate = candidates[i - start];
        candidate.key = offloadKeyOf(request.blockHashes, f, i);
        for (let j = 0; j < f; j++) candidate.gpuBlockIds[j] = view.blockIds[i * f + j];
      }
      const result = context.store(request.id, candidates, false, start);
      if (result === null) {
        this.behind.add(request.id);
        continue;
      }
      const mark = start + acceptedRun(candidates, result.declinedKeys);
      this.nextToStore.set(request.id, mark);
      if (mark < end) this.behind.add(request.id);
      else if (this.behind.size > 0) this.behind.delete(request.id);
    }
  }

  onLoadIssued(request: Request, endBlock: number): void {
    const mark = this.nextToStore.get(request.id) ?? 0;
    if (endBlock > mark) this.nextToStore.set(request.id, endBlock);
  }

  onPreempted(request: Request): void {
    this.nextToStore.delete(request.id);
    this.behind.delete(request.id);
  }

  onRequestFinished(request: Request): void {
    this.nextToStore.delete(request.id);
    this.behind.delete(request.id);
  }

  onGpuBlockEvicted(): void {
    // Blocks were stored when computed; an eviction changes nothing.
  }

  attachGpuPrefixCache(): void {
    // Never reads the GPU cache: the step's block tables say where computed blocks are.
  }

  reset(): void {
    this.nextToStore.clear();
    this.behind.clear();
  }
}

/** How many candidates, from the first, the manager did not decline. */
/** A store candidate the policy refills in place. */
interface RefilledCandidate extends StoreCandidate {
  key: BlockHash;
  readonly gpuBlockIds: number[];
}

/**
 * Candidates reused from offer to offer. In a decode step every request
 * that completes a block makes an offer, so building fresh candidate objects
 * and id arrays for each was most of what such a step allocated per block.
 */
class OfferBuffer {
  private readonly pool: RefilledCandidate[] = [];
  private readonly offer: RefilledCandidate[] = [];

  /** `count` candidates of `idsPerCandidate` GPU block ids each, to be filled in. */
  fill(count: number, idsPerCandidate: number): RefilledCandidate[] {
    const pool = this.pool;
    while (pool.length < count) pool.push({ key: '', gpuBlockIds: [] });
    const offer = this.offer;
    for (let i = 0; i < count; i++) {
      const candidate = pool[i];
      candidate.gpuBlockIds.length = idsPerCandidate;
      offer[i] = candidate;
    }
    offer.length = count;
    return offer;
  }
}

function acceptedRun(candidates: readonly StoreCandidate[], declined: ReadonlySet<BlockHash>): number {
  let n = 0;
  while (n < candidates.length && !declined.has(candidates[n].key)) n++;
  return n;
}
