import { mix } from '../model/mix.js';

/**
 * Chained block hashes: h_i = H(h_{i-1}, tokens of block i, extra keys).
 * Two independent 32-bit lanes give a 64-bit hash rendered as 16 hex digits.
 * Nothing here depends on process state (no random seeds), so every rank,
 * process and machine derives the same hash for the same token prefix.
 */
export type BlockHash = string;

const LANE_A_SEED = 0x6b767469; // "kvti"
const LANE_B_SEED = 0x65723031; // "er01"
const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

function round(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) >>> 0;
}

function hex8(x: number): string {
  return (x >>> 0).toString(16).padStart(8, '0');
}

/** Hash of the block of `tokens[start, end)` chained on `parent` (null for the first block). */
export function hashBlock(
  parent: BlockHash | null,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
  extraKey: string | null = null,
): BlockHash {
  let a = LANE_A_SEED;
  let b = LANE_B_SEED;
  if (parent !== null) {
    a = round(a, parseInt(parent.slice(0, 8), 16));
    a = round(a, parseInt(parent.slice(8, 16), 16));
    b = round(b, parseInt(parent.slice(8, 16), 16));
    b = round(b, parseInt(parent.slice(0, 8), 16));
  }
  for (let i = start; i < end; i++) {
    const t = tokens[i] >>> 0;
    a = round(a, t);
    b = round(b, t ^ 0x5bd1e995);
  }
  if (extraKey !== null) {
    for (let i = 0; i < extraKey.length; i++) {
      const c = extraKey.charCodeAt(i);
      a = round(a, c + 0x100);
      b = round(b, c + 0x200);
    }
  }
  const n = end - start;
  a = mix((a ^ n) >>> 0);
  b = mix((b ^ Math.imul(n, 0x27d4eb2f)) >>> 0);
  return hex8(a) + hex8(b);
}

/**
 * Appends the hashes of the full blocks of `tokens` not yet in `hashes`
 * (each block's hash is computed once, as tokens arrive).
 */
export function extendBlockHashes(
  hashes: BlockHash[],
  tokens: ArrayLike<number>,
  numTokens: number,
  blockSize: number,
  extraKey: string | null = null,
): void {
  const full = Math.floor(numTokens / blockSize);
  for (let i = hashes.length; i < full; i++) {
    const parent = i === 0 ? null : hashes[i - 1];
    hashes.push(hashBlock(parent, tokens, i * blockSize, (i + 1) * blockSize, extraKey));
  }
}

/** The hashes of every full block of `tokens`. */
export function blockHashes(
  tokens: ArrayLike<number>,
  blockSize: number,
  extraKey: string | null = null,
): BlockHash[] {
  const out: BlockHash[] = [];
  extendBlockHashes(out, tokens, tokens.length, blockSize, extraKey);
  return out;
}
