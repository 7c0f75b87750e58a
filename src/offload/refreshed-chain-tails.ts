import type { BlockHash } from '../core/block-hash.js';
import { ABSENT } from '../core/lane-hash-table.js';

/** Chains remembered: more than the requests that store in one stretch of a few steps. */
const MAX_CHAINS = 8192;

/**
 * The CPU block id of the last block of each recently refreshed chain, for
 * refreshes that read only the offered keys and the one before them (the
 * prefix-aware orders). A request's next store offers the blocks after the
 * ones it offered before, so the key before them ended its previous
 * refresh: its id is found by that key, in a map that has the key's hash
 * already, and confirmed by the key the tier holds at it, rather than by
 * parsing the key and probing the tier's index.
 *
 * At most MAX_CHAINS chains are remembered, the first remembered forgotten
 * first; a forgotten one is just looked up.
 */
export class RefreshedChainTails {
  private readonly idByLastKey = new Map<BlockHash, number>();

  constructor(
    /** The key held at CPU block `id`, or undefined. */
    private readonly keyAt: (id: number) => BlockHash | undefined,
  ) {}

  /**
   * The CPU block id holding `key`, when `key` ended a remembered chain and
   * the tier still holds it at that id; ABSENT when that is not known (the
   * caller looks it up). Forgets the chain either way.
   */
  take(key: BlockHash): number {
    const id = this.idByLastKey.get(key);
    if (id === undefined) return ABSENT;
    this.idByLastKey.delete(key);
    return this.keyAt(id) === key ? id : ABSENT;
  }

  /** A chain ending with `key`, held at CPU block `id` (ABSENT: not held, nothing to remember), was refreshed. */
  remember(key: BlockHash, id: number): void {
    if (id === ABSENT) return;
    const map = this.idByLastKey;
    map.set(key, id);
    if (map.size > MAX_CHAINS) map.delete(map.keys().next().value as BlockHash);
  }

  clear(): void {
    this.idByLastKey.clear();
  }
}
