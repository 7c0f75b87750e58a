import type { BlockHash } from '../core/block-hash.js';
import { ABSENT } from '../core/lane-hash-table.js';

/** Chains remembered: more than the requests that store in one stretch of a few steps. */
const MAX_CHAINS = 8192;

/**
 * The CPU block ids of recently refreshed chains, for the refresh of the
 * next store of the same request. A request stores a block every few decode
 * steps and each store refreshes its whole chain, so looking every key up
 * again would make a store's cost grow with the chain; instead the ids of
 * the chain up to the previous store are found by that chain's last key
 * (which, being a chained hash, pins down every key before it) and each is
 * confirmed by reading the key the tier holds at it. Only keys new since the
 * previous store, and keys whose block moved or left, are looked up.
 *
 * At most MAX_CHAINS chains are remembered, the least recently refreshed
 * forgotten first; a forgotten chain is just looked up whole.
 */
export class RefreshedChainIds {
  /** Ids of each remembered chain, by its last key; insertion order = least recently refreshed first. */
  private readonly byLastKey = new Map<BlockHash, Int32Array>();

  constructor(
    /** Fills `ids[from, to)` with the CPU block id of each of `keys[from, to)`, or ABSENT. */
    private readonly fillIds: (keys: readonly BlockHash[], from: number, to: number, ids: Int32Array) => void,
    /** The key held at CPU block `id`, or undefined. */
    private readonly keyAt: (id: number) => BlockHash | undefined,
  ) {}

  /**
   * The CPU block id of each key of the chain `chain[0, n)` (ABSENT when not
   * held), its keys before `firstOffered` having been refreshed before. The
   * array may be longer than the chain; it is the caller's until the next call.
   */
  idsOf(chain: readonly BlockHash[], firstOffered: number, n: number): Int32Array {
    let ids: Int32Array | undefined;
    let known = 0;
    if (firstOffered > 0 && firstOffered <= n) {
      const previousLast = chain[firstOffered - 1];
      ids = this.byLastKey.get(previousLast);
      if (ids !== undefined) {
        this.byLastKey.delete(previousLast);
        known = Math.min(firstOffered, ids.length);
      }
    }
    if (ids === undefined || ids.length < n) {
      const grown = new Int32Array(Math.max(16, n, 2 * (ids?.length ?? 0)));
      if (ids !== undefined) grown.set(ids.subarray(0, known));
      ids = grown;
    }
    for (let i = 0; i < known; i++) {
      const id = ids[i];
      if (id === ABSENT || this.keyAt(id) !== chain[i]) this.fillIds(chain, i, i + 1, ids);
    }
    this.fillIds(chain, known, n, ids);
    if (n > 0) this.remember(chain[n - 1], ids);
    return ids;
  }

  clear(): void {
    this.byLastKey.clear();
  }

  private remember(lastKey: BlockHash, ids: Int32Array): void {
    const map = this.byLastKey;
    map.delete(lastKey);
    map.set(lastKey, ids);
    if (map.size > MAX_CHAINS) map.delete(map.keys().next().value as BlockHash);
  }
}
