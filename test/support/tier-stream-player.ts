import type { TierEvent, TierLookup, TierStream } from '../../src/bench/tier-stream.js';
import { EVICTION_POLICY_NAMES, type EvictionPolicyName } from '../../src/config/eviction-policy-names.js';
import { createOffloadingManager } from '../../src/offload/create-manager.js';

/** A hand-made first-admission lookup: a hit may serve every token of its blocks past `coveredTokens`. */
export function lookup(blocks: number[], options: Partial<Omit<TierLookup, 'kind' | 'blocks'>> = {}): TierEvent {
  return {
    kind: 'lookup',
    blocks: Int32Array.from(blocks),
    firstDepth: options.firstDepth ?? 0,
    coveredTokens: options.coveredTokens ?? 0,
    maxHitTokens: options.maxHitTokens ?? Number.MAX_SAFE_INTEGER,
    readmission: options.readmission ?? false,
  };
}

/** The lookup of a request admitted again after a preemption. */
export function readmission(blocks: number[]): TierEvent {
  return lookup(blocks, { readmission: true });
}

export function offer(blocks: number[]): TierEvent {
  return { kind: 'offer', blocks: Int32Array.from(blocks) };
}

export function stream(events: TierEvent[], blockTokens = 16): TierStream {
  const uniqueBlocks = 1 + Math.max(...events.flatMap((e) => [...e.blocks]));
  return { blockTokens, events, uniqueBlocks };
}

/** Every eviction policy storing on compute, and LRU behind a reuse filter of 2. */
export const ONLINE_POLICIES: readonly { readonly label: string; readonly eviction: EvictionPolicyName; readonly reuseThreshold?: number }[] = [
  ...EVICTION_POLICY_NAMES.map((eviction) => ({ label: eviction, eviction })),
  { label: 'reuse:2', eviction: 'lru', reuseThreshold: 2 },
];

/**
 * CPU-tier hit blocks of a real CPU-tier manager fed the stream as the
 * connector feeds it: a lookup touches its blocks, then loads the resident
 * run; an offer stores what the manager accepts, at once. Lookups at
 * readmission are made but their hits are not counted.
 */
export function playOnline(events: readonly TierEvent[], policy: (typeof ONLINE_POLICIES)[number], capacityBlocks: number): number {
  const manager = createOffloadingManager({ eviction: policy.eviction, capacityBlocks, reuseThreshold: policy.reuseThreshold });
  const key = (block: number) => `b${block}`;
  let hits = 0;
  for (const event of events) {
    const keys = [...event.blocks].map(key);
    if (event.kind === 'offer') {
      const out = manager.prepareStore(keys);
      if (out !== null && out.keysToStore.length > 0) manager.completeStore(out.keysToStore, true);
      continue;
    }
    manager.touch(keys);
    const h = manager.lookup(keys) ?? 0;
    if (h > 0) {
      manager.prepareLoad(keys.slice(0, h));
      manager.completeLoad(keys.slice(0, h));
    }
    if (!event.readmission) hits += h;
  }
  return hits;
}
