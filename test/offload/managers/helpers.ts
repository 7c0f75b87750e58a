import { expect } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { EVICTION_POLICY_NAMES, type EvictionPolicyName } from '../../../src/config/eviction-policy-names.js';
import { createOffloadingManager } from '../../../src/offload/create-manager.js';
import type { OffloadingManager, PrepareStoreOutput } from '../../../src/offload/manager.js';

/** Keys named after small numbers, so scenarios read like "store 1 and 2". */
export function keys(...ns: number[]): BlockHash[] {
  return ns.map((n) => `k${n}`);
}

export interface ManagerKind {
  readonly name: EvictionPolicyName;
  /**
   * Whether the order is by recency (LRU, ARC: a touch makes blocks the
   * newest, and blocks never touched go in the order they were stored);
   * the prefix-aware orders (S3-FIFO, LHD) order by reuse and the prefix tree.
   */
  readonly byRecency: boolean;
  create(capacityBlocks: number): OffloadingManager;
}

const RECENCY_ORDERS: readonly EvictionPolicyName[] = ['lru', 'arc', 'lru+queue'];

/** A manager of every eviction policy a config may name, built as the engine builds it. */
export const MANAGER_KINDS: readonly ManagerKind[] = EVICTION_POLICY_NAMES.map((name) => ({
  name,
  byRecency: RECENCY_ORDERS.includes(name),
  create: (capacityBlocks: number) => createOffloadingManager({ eviction: name, capacityBlocks }),
}));

/** prepareStore that must succeed. */
export function prepareStore(manager: OffloadingManager, ...ns: number[]): PrepareStoreOutput {
  const out = manager.prepareStore(keys(...ns));
  expect(out, `prepareStore(${ns.join(', ')}) was refused`).not.toBeNull();
  return out as PrepareStoreOutput;
}

/** Stores the given blocks and completes the store successfully. */
export function storeReady(manager: OffloadingManager, ...ns: number[]): PrepareStoreOutput {
  const out = prepareStore(manager, ...ns);
  manager.completeStore(out.keysToStore, true);
  return out;
}

/** Stores each block in turn, completing each store before the next. */
export function storeEachReady(manager: OffloadingManager, ...ns: number[]): void {
  for (const n of ns) storeReady(manager, n);
}

/** The blocks among `ns` that a lookup reports as loadable, checked one at a time. */
export function loadable(manager: OffloadingManager, ...ns: number[]): number[] {
  return ns.filter((n) => manager.lookup(keys(n)) === 1);
}


/**
 * A request's chain stored as the connector stores it: each group of blocks
 * is one store of the chain's next blocks, followed by a refresh of the chain
 * so far; blocks in `lookedUp` are touched first, as the request's admission
 * lookup touches its prompt.
 */
export function extendChain(manager: OffloadingManager, lookedUp: readonly number[], ...stores: (readonly number[])[]): void {
  manager.touch(keys(...lookedUp));
  const chain: number[] = [];
  for (const group of stores) {
    const from = chain.length;
    chain.push(...group);
    storeReady(manager, ...group);
    manager.refresh(keys(...chain), from, chain.length);
  }
}

/** Keys of one prompt: `name`'s blocks 0 .. n-1. */
export function promptKeys(name: string, n: number): BlockHash[] {
  return Array.from({ length: n }, (_, i) => `${name}-${i}`);
}

/** What the connector does at admission: touch the prompt, then look it up; the hit blocks. */
export function admit(manager: OffloadingManager, keys: readonly BlockHash[]): number {
  manager.touch(keys);
  return manager.lookup(keys) ?? 0;
}

/** Offers `keys` once, completing the store when the tier took them; false when it passed them by. */
export function offer(manager: OffloadingManager, keys: readonly BlockHash[]): boolean {
  const out = manager.prepareStore(keys);
  if (out === null) return false;
  manager.completeStore(out.keysToStore, true);
  return true;
}
