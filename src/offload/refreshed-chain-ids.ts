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
 * (which, being a chained hash, pins down every key before it). A held
 * key keeps its id until its block leaves the tier, so while no block left
 * since the previous refresh those ids stand as they are; otherwise each is
 * confirmed by reading the key the tier holds at it. Only keys new since the
 * previous store, keys not held then, and keys whose block left are looked up.
 *
 * At most MAX_CHAINS chains are remembered, the least recently refreshed
 * forgotten first; a forgotten chain is just looked up whole.
 */
/** A remembered chain: its ids, and how many blocks had left the tier when they were read. */
interface ChainIds {
  ids: Int32Array;
  leftBefore: number;
}

export class RefreshedChainIds {
  /** Each remembered chain, by its last key; insertion order = least recently refreshed first. */
  private readonly byLastKey = new Map<BlockHash, ChainIds>();

  constructor(
    /** Fills `ids[from, to)` with the CPU block id of each of `keys[from, to)`, or ABSENT. */
    private readonly fillIds: (keys: readonly BlockHash[], from: number, to: number, ids: Int32Array) => void,
    /** The key held at CPU block `id`, or undefined. */
    private readonly keyAt: (id: number) => BlockHash | undefined,
    /** How many blocks have left the tier so far (evicted, failed or lost). */
    private readonly blocksLeft: () => number,
  ) {}

  /**
   * The CPU block id of each key of the chain `chain[0, n)` (ABSENT when not
   * held), its keys before `firstOffered` having been refreshed before. The
   * array may be longer than the chain; it is the caller's until the next call.
   */
  idsOf(chain: readonly BlockHash[], firstOffered: number, n: number): Int32Array {
    let entry: ChainIds | undefined;
    let known = 0;
    if (firstOffered > 0 && firstOffered <= n) {
      const previousLast = chain[firstOffered - 1];
      entry = this.byLastKey.get(previousLast);
      if (entry !== undefined) {
        this.byLastKey.delete(previousLast);
        known = Math.min(firstOffered, entry.ids.length);
      }
    }
    const left = this.blocksLeft();
    entry ??= { ids: new Int32Array(Math.max(16, n)), leftBefore: left };
    if (entry.ids.length < n) {
      const grown = new Int32Array(Math.max(n, 2 * entry.ids.length));
      grown.set(entry.ids.subarray(0, known));
      entry.ids = grown;
    }
    const ids = entry.ids;
    const unchanged = entry.leftBefore === left;
    for (let i = 0; i < known; i++) {
      const id = ids[i];
      if (id === ABSENT || (!unchanged && this.keyAt(id) !== chain[i])) this.fillIds(chain, i, i + 1, ids);
    }
    this.fillIds(chain, known, n, ids);
    entry.leftBefore = left;
    if (n > 0) this.remember(chain[n - 1], entry);
    return ids;
  }

  clear(): void {
    this.byLastKey.clear();
  }

  private remember(lastKey: BlockHash, entry: ChainIds): void {
    const map = this.byLastKey;
    map.delete(lastKey);
    map.set(lastKey, entry);
    if (map.size > MAX_CHAINS) map.delete(map.keys().next().value as BlockHash);
  }
}
