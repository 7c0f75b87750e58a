import { ConfigError } from '../core/errors.js';

/** A store policy's name as a config spells it. */
export type StorePolicyName = 'on-compute' | 'on-evict' | `reuse:${number}`;

/**
 * The store policy a config names. There are two store policies: 'on-compute'
 * (default: each full offloaded block is offered once computed) and
 * 'on-evict' (write-back of what the GPU prefix cache evicts). 'reuse:K' is
 * no third policy but on-compute with an admission filter in front of the
 * CPU tier: the manager is wrapped in a ReuseFilterManager
 * (offload/reuse-filter-manager.ts) that stores a block only once lookups
 * have seen its key K times, whatever eviction policy the manager it wraps
 * follows.
 */
export type StorePolicySpec =
  /** `reuseThreshold`: the reuse filter's K for 'reuse:K'; null for plain 'on-compute'. */
  | { readonly kind: 'on-compute'; readonly reuseThreshold: number | null }
  | { readonly kind: 'on-evict' };

const REUSE_PATTERN = /^reuse:([1-9][0-9]*)$/;

/** What a store policy name must be, as the config schema's messages say it. */
export const STORE_POLICY_EXPECTED = 'expected on-compute, on-evict or reuse:K with K >= 1';

/** The policy `name` stands for, or null when it names none. This is the grammar's one statement. */
export function storePolicySpecOf(name: unknown): StorePolicySpec | null {
  if (name === 'on-compute') return { kind: 'on-compute', reuseThreshold: null };
  if (name === 'on-evict') return { kind: 'on-evict' };
  const match = typeof name === 'string' ? REUSE_PATTERN.exec(name) : null;
  if (match !== null) {
    const threshold = Number(match[1]);
    if (Number.isSafeInteger(threshold)) return { kind: 'on-compute', reuseThreshold: threshold };
  }
  return null;
}

export function isStorePolicyName(name: unknown): name is StorePolicyName {
  return storePolicySpecOf(name) !== null;
}

/** Parses a store policy name; the error names the field and the value. */
export function parseStorePolicyName(name: unknown): StorePolicySpec {
  const spec = storePolicySpecOf(name);
  if (spec !== null) return spec;
  throw new ConfigError(
    `storePolicy must be 'on-compute', 'on-evict' or 'reuse:K' with an integer K >= 1, got ${JSON.stringify(name) ?? String(name)}`,
  );
}
