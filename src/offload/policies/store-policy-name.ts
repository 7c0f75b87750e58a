import { ConfigError } from '../../core/errors.js';

/**
 * The store policy a config names: 'on-compute' (default), 'on-evict'
 * (write-back), or 'reuse:K' (store on compute only blocks looked up at least
 * K times; the manager is wrapped in a reuse filter).
 */
/** A store policy's name as a config spells it. */
export type StorePolicyName = 'on-compute' | 'on-evict' | `reuse:${number}`;

export type StorePolicySpec =
  | { readonly kind: 'on-compute' }
  | { readonly kind: 'on-evict' }
  | { readonly kind: 'reuse'; readonly threshold: number };

const REUSE_PATTERN = /^reuse:([1-9][0-9]*)$/;

/** Parses a store policy name; the error names the field and the value. */
export function parseStorePolicyName(name: unknown): StorePolicySpec {
  if (name === 'on-compute') return { kind: 'on-compute' };
  if (name === 'on-evict') return { kind: 'on-evict' };
  const match = typeof name === 'string' ? REUSE_PATTERN.exec(name) : null;
  if (match !== null) {
    const threshold = Number(match[1]);
    if (Number.isSafeInteger(threshold)) return { kind: 'reuse', threshold };
  }
  throw new ConfigError(
    `storePolicy must be 'on-compute', 'on-evict' or 'reuse:K' with an integer K >= 1, got ${JSON.stringify(name) ?? String(name)}`,
  );
}
