import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { ABSENT } from '../../../src/core/lane-hash-table.js';
import { RefreshedChainIds } from '../../../src/offload/refreshed-chain-ids.js';
import { keys } from './helpers.js';

/** A tier as the memo sees it: key -> CPU block id, with every lookup and every check of a remembered id counted. */
class FakeTier {
  readonly idByKey = new Map<BlockHash, number>();
  lookups: BlockHash[] = [];
  checks = 0;
  private left = 0;
  readonly memo = new RefreshedChainIds(
    (chain, from, to, ids) => {
      for (let i = from; i < to; i++) {
        this.lookups.push(chain[i]);
        ids[i] = this.idByKey.get(chain[i]) ?? ABSENT;
      }
    },
    (id) => {
      this.checks++;
      return [...this.idByKey].find(([, held]) => held === id)?.[0];
    },
    () => this.left,
  );

  hold(key: BlockHash, id: number): void {
    this.idByKey.set(key, id);
  }

  /** `key`'s block leaves the tier. */
  drop(key: BlockHash): void {
    this.idByKey.delete(key);
    this.left++;
  }

  /** The ids the memo gives for `chain`, offered from `firstOffered`, and the keys it looked up for them. */
  refresh(chain: readonly BlockHash[], firstOffered: number): { ids: number[]; lookedUp: BlockHash[] } {
    this.lookups = [];
    const ids = [...this.memo.idsOf(chain, firstOffered, chain.length).subarray(0, chain.length)];
    return { ids, lookedUp: this.lookups };
  }
}

describe('RefreshedChainIds', () => {
  it("looks up only the keys a request's next store added to the chain it refreshed before", () => {
    const tier = new FakeTier();
    [1, 2, 3, 4].forEach((n, id) => tier.hold(`k${n}`, id));
    expect(tier.refresh(keys(1, 2, 3), 0)).toEqual({ ids: [0, 1, 2], lookedUp: keys(1, 2, 3) });
    expect(tier.refresh(keys(1, 2, 3, 4), 3)).toEqual({ ids: [0, 1, 2, 3], lookedUp: keys(4) });
    // No block left the tier meanwhile: the remembered ids stand without a check.
    expect(tier.checks).toBe(0);
  });

  it('looks a key up again when its block left or moved, and keeps looking up a key the tier does not hold', () => {
    const tier = new FakeTier();
    tier.hold('k1', 0);
    tier.hold('k3', 2);
    expect(tier.refresh(keys(1, 2, 3), 0).ids).toEqual([0, ABSENT, 2]);
    // Block 3 was evicted and stored again at CPU block 5; block 2 is still absent.
    tier.drop('k3');
    tier.hold('k3', 5);
    tier.hold('k4', 6);
    expect(tier.refresh(keys(1, 2, 3, 4), 3)).toEqual({ ids: [0, ABSENT, 5, 6], lookedUp: keys(2, 3, 4) });
  });

  it('looks up the whole chain when the part refreshed before is not the one it remembers', () => {
    const tier = new FakeTier();
    [1, 2, 3, 4].forEach((n, id) => tier.hold(`k${n}`, id));
    tier.refresh(keys(1, 2), 0);
    // The chain refreshed before ended at k2, not at k3.
    expect(tier.refresh(keys(1, 2, 3, 4), 3).lookedUp).toEqual(keys(1, 2, 3, 4));
  });
});
