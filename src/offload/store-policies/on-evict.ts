import type { BlockHash } from '../../core/block-hash.js';
import { KvtierError } from '../../core/errors.js';
import type { StepView } from '../../scheduler/connector-port.js';
import type { Request } from '../../scheduler/request.js';
import { offloadKeyOf } from '../geometry.js';
import { FreedBlockGroups } from './freed-block-groups.js';
import type { GpuPrefixCache, OffloadGeometry, StoreCandidate, StoreContext, StorePolicy } from './store-policy.js';
import { ERROR_CODES } from '../../core/error-codes.js';

/** The on-evict policy was used without the GPU prefix cache it needs. */
export class StorePolicyWiringError extends KvtierError {
  constructor(message: string) {
    super(ERROR_CODES.storePolicy, message);
  }
}

/**
 * Store on evict (write-back): nothing is stored when computed; a block goes
 * to the CPU tier when the GPU prefix cache evicts it, so the tier holds what
 * the GPU no longer does instead of a copy of it. An eviction happens while a
 * step is scheduled, and the block is overwritten by that step's writes, so
 * its store is fenced: the worker submits it first and this step's loads and
 * forward wait until it has read its blocks.
 *
 * With f > 1 an offloaded block needs all f GPU blocks of its group. Freed
 * requests' groups are remembered; when one member is evicted the group is
 * stored if every member still holds its content: evicted in this same step
 * (intact until this step's writes), or still cached, not being loaded and
 * not written by this step's forward. Otherwise the group is skipped. Blocks
 * the tier already holds are not stored again (the manager skips them).
 */
export class StoreOnEvictPolicy implements StorePolicy {
  readonly name = 'on-evict';
  private gpuCache: GpuPrefixCache | null = null;
  private groups: FreedBlockGroups | null = null;
  /** Blocks evicted while this step was scheduled: hash -> GPU block id. */
  private evicted = new Map<BlockHash, number>();

  constructor(private readonly geometry: OffloadGeometry) {}

  attachGpuPrefixCache(cache: GpuPrefixCache): void {
    this.gpuCache = cache;
    this.groups = new FreedBlockGroups(cache.numBlocks);
  }

  onGpuBlockEvicted(blockId: number, hash: BlockHash): void {
    this.evicted.set(hash, blockId);
  }

  storesFor(step: StepView, context: StoreContext): void {
    const groups = this.groupsOrThrow();
    if (this.evicted.size === 0) return;
    const evicted = this.evicted;
    this.evicted = new Map();

    let candidates: StoreCandidate[];
    if (groups === null) {
      candidates = [];
      for (const [hash, blockId] of evicted) candidates.push({ key: hash, gpuBlockIds: [blockId] });
    } else {
      candidates = this.completeGroups(groups, evicted, step);
      // Their evicted members are overwritten this step: these groups can never be completed again.
      for (const hash of evicted.keys()) groups.forgetGroupsContaining(hash);
    }
    if (candidates.length === 0) return;
    if (context.store(null, candidates, true) !== null) return;
    // No room for all of them at once: store what fits, block by block.
    for (const candidate of candidates) context.store(null, [candidate], true);
  }

  onRequestFinished(request: Request): void {
    this.rememberGroups(request);
  }

  onPreempted(request: Request): void {
    this.rememberGroups(request);
  }

  onLoadIssued(): void {
    // Nothing is stored on compute, so there is no mark to move.
  }

  reset(): void {
    this.evicted.clear();
    this.groups?.clear();
  }

  /** The group memory, or null when f = 1 (an evicted block is a whole offloaded block). */
  private groupsOrThrow(): FreedBlockGroups | null {
    if (this.geometry.offloadFactor === 1) return null;
    if (this.groups === null) {
      throw new StorePolicyWiringError(
        `store policy 'on-evict' with offloadFactor ${this.geometry.offloadFactor} needs the GPU prefix cache: ` +
          'call attachGpuPrefixCache(scheduler.kvCacheManager.pool) on the connector before the first step',
      );
    }
    return this.groups;
  }

  /** Remembers the request's groups whose last block is cached (the others can never be stored whole). */
  private rememberGroups(request: Request): void {
    const groups = this.groupsOrThrow();
    if (groups === null) return;
    const cache = this.gpuCache as GpuPrefixCache;
    const f = this.geometry.offloadFactor;
    const hashes = request.blockHashes;
    const fullGroups = Math.floor(hashes.length / f);
    for (let i = 0; i < fullGroups; i++) {
      if (cache.getCachedBlock(offloadKeyOf(hashes, f, i)) === null) continue;
      groups.remember(hashes.slice(i * f, (i + 1) * f));
    }
  }

  private completeGroups(groups: FreedBlockGroups, evicted: ReadonlyMap<BlockHash, number>, step: StepView): StoreCandidate[] {
    const written = blocksWrittenBy(step, this.geometry.blockSize);
    const cache = this.gpuCache as GpuPrefixCache;
    const intactBlockOf = (hash: BlockHash): number | null => {
      const evictedId = evicted.get(hash);
      if (evictedId !== undefined) return evictedId;
      const block = cache.getCachedBlock(hash);
      if (block === null || block.pendingJob !== null || written.has(block.id)) return null;
      return block.id;
    };

    const candidates: StoreCandidate[] = [];
    const considered = new Set<BlockHash>();
    for (const hash of evicted.keys()) {
      for (const key of groups.groupsContaining(hash)) {
        if (considered.has(key)) continue;
        considered.add(key);
        const members = groups.membersOf(key) as readonly BlockHash[];
        const gpuBlockIds: number[] = [];
        for (const member of members) {
          const blockId = intactBlockOf(member);
          if (blockId === null) break;
          gpuBlockIds.push(blockId);
        }
        if (gpuBlockIds.length === members.length) candidates.push({ key, gpuBlockIds });
      }
    }
    return candidates;
  }
}

/** GPU blocks this step's forward writes: each scheduled request's blocks covering its new tokens. */
function blocksWrittenBy(step: StepView, blockSize: number): Set<number> {
  const written = new Set<number>();
  for (const view of step.scheduled) {
    // The scheduler has already advanced numComputedTokens past this step's tokens.
    const end = view.request.numComputedTokens;
    const start = end - view.numScheduledTokens;
    const last = Math.ceil(end / blockSize);
    for (let i = Math.floor(start / blockSize); i < last; i++) written.add(view.blockIds[i]);
  }
  return written;
}
