import { expect } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { ArcOffloadingManager } from '../../../src/offload/arc-manager.js';
import { HoldOffloadingManager } from '../../../src/offload/hold-manager.js';
import { LruOffloadingManager } from '../../../src/offload/lru-manager.js';
import type { OffloadingManager, PrepareStoreOutput } from '../../../src/offload/manager.js';

/** Keys named after small numbers, so scenarios read like "store 1 and 2". */
export function keys(...ns: number[]): BlockHash[] {
  return ns.map((n) => `k${n}`);
}

export interface ManagerKind {
  readonly name: 'lru' | 'arc' | 'hold';
  create(capacityBlocks: number): OffloadingManager;
}

export const MANAGER_KINDS: readonly ManagerKind[] = [
  { name: 'lru', create: (capacityBlocks) => new LruOffloadingManager({ capacityBlocks }) },
  { name: 'arc', create: (capacityBlocks) => new ArcOffloadingManager({ capacityBlocks }) },
  { name: 'hold', create: (capacityBlocks) => new HoldOffloadingManager({ capacityBlocks }) },
];

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

