import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { ABSENT } from '../../../src/core/lane-hash-table.js';
import { CpuOffloadingManager } from '../../../src/offload/cpu-offloading-manager.js';
import type { EvictionPolicy } from '../../../src/offload/manager.js';
import { keys } from './helpers.js';

/**
 * A refresh that reads only its tail (the prefix-aware orders) names the key
 * before the offered ones by the CPU block holding it, found from the
 * chain's previous refresh when that one ended there: the ids a policy is
 * handed must be the tier's, whatever left, moved or was reset meanwhile.
 */

/** Evicts in the order blocks were stored, and records the ids each refresh hands it. */
class RecordingTailPolicy implements EvictionPolicy {
  readonly refreshReadsWholeChain = false;
  refreshes: { keys: BlockHash[]; ids: number[] }[] = [];
  private order: BlockHash[] = [];

  admitted(key: BlockHash): void {
    this.order.push(key);
  }

  touched(): void {}

  refreshedChain(chain: readonly BlockHash[], ids: ArrayLike<number>, from: number, to: number): void {
    this.refreshes.push({ keys: chain.slice(from, to), ids: Array.from({ length: to - from }, (_, i) => ids[from + i]) });
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const victims = this.order.filter(evictable).slice(0, count);
    return victims.length === count ? victims : null;
  }

  evicted(evictedKeys: readonly BlockHash[]): void {
    this.order = this.order.filter((key) => !evictedKeys.includes(key));
  }

  dropped(key: BlockHash): void {
    this.order = this.order.filter((held) => held !== key);
  }

  reset(): void {
    this.order = [];
  }
}

function tier(capacityBlocks: number): { manager: CpuOffloadingManager; policy: RecordingTailPolicy } {
  const policy = new RecordingTailPolicy();
  return { manager: new CpuOffloadingManager({ capacityBlocks }, policy), policy };
}

/** A request's store of `chain[from, to)` and its refresh, as the connector makes them; returns the ids the refresh handed over. */
function storeAndRefresh(manager: CpuOffloadingManager, policy: RecordingTailPolicy, chain: readonly BlockHash[], from: number, to: number): number[] {
  const out = manager.prepareStore(chain.slice(from, to));
  expect(out, `store of ${chain.slice(from, to).join(', ')}`).not.toBeNull();
  manager.completeStore(out?.keysToStore ?? [], true);
  manager.refresh(chain, from, to);
  return policy.refreshes[policy.refreshes.length - 1].ids;
}

/** The CPU block id holding each key, asked of the tier's own index through a one-key load. */
function heldIds(manager: CpuOffloadingManager, ...held: BlockHash[]): number[] {
  return held.map((key) => {
    if (manager.lookup([key]) !== 1) return ABSENT;
    const [id] = manager.prepareLoad([key]);
    manager.completeLoad([key]);
    return id;
  });
}

describe('refresh of a chain tail', () => {
  it("names the block before the offered ones by the id its chain's previous refresh ended at", () => {
    const { manager, policy } = tier(8);
    const chain = keys(1, 2, 3, 4);
    storeAndRefresh(manager, policy, chain, 0, 2);
    expect(storeAndRefresh(manager, policy, chain, 2, 3)).toEqual(heldIds(manager, 'k2', 'k3'));
    expect(storeAndRefresh(manager, policy, chain, 3, 4)).toEqual(heldIds(manager, 'k3', 'k4'));
  });

  it('names it ABSENT once its block left, even when another key took its CPU block', () => {
    const { manager, policy } = tier(2);
    const chain = keys(1, 2, 3);
    storeAndRefresh(manager, policy, chain, 0, 2);
    // Another request's block takes the room (and the CPU block) of k1, then of k2.
    storeAndRefresh(manager, policy, keys(10), 0, 1);
    storeAndRefresh(manager, policy, keys(11), 0, 1);
    expect(heldIds(manager, 'k2')).toEqual([ABSENT]);
    expect(storeAndRefresh(manager, policy, chain, 2, 3)).toEqual([ABSENT, heldIds(manager, 'k3')[0]]);
  });

  it('names the block where it was stored again after it left', () => {
    const { manager, policy } = tier(2);
    const chain = keys(1, 2, 3);
    storeAndRefresh(manager, policy, chain, 0, 2);
    storeAndRefresh(manager, policy, keys(10, 11), 0, 2);
    // k2 comes back into the CPU block k10 held, k1's block holding k11.
    storeAndRefresh(manager, policy, keys(2), 0, 1);
    const [k2] = heldIds(manager, 'k2');
    expect(k2).not.toBe(ABSENT);
    const ids = storeAndRefresh(manager, policy, chain, 2, 3);
    expect(ids).toEqual([k2, heldIds(manager, 'k3')[0]]);
  });

  it('names it ABSENT after a reset, though its CPU block holds another key now', () => {
    const { manager, policy } = tier(4);
    const chain = keys(1, 2, 3);
    storeAndRefresh(manager, policy, chain, 0, 2);
    manager.reset();
    // The same ids now hold other keys.
    storeAndRefresh(manager, policy, keys(20, 21), 0, 2);
    expect(storeAndRefresh(manager, policy, chain, 2, 3)).toEqual([ABSENT, heldIds(manager, 'k3')[0]]);
  });
});
