import { mix } from '../model/mix.js';

/**
 * Chained block hashes: h_i = H(h_{i-1}, tokens of block i, extra keys).
 * Two independent 32-bit lanes give a 64-bit hash rendered as 16 hex digits.
 * Nothing here depends on process state (no random seeds), so every rank,
 * process and machine derives the same hash for the same token prefix.
 *
 * Hashing runs on the scheduler's hot path (a block completes every
 * blockSize decode steps of every request), so the hex rendering and
 * parsing below work on character codes: one flat string per hash, no
 * intermediate strings.
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

/** Character codes of '0'..'9', 'a'..'f'. */
const HEX_CODES: readonly number[] = Array.from('0123456789abcdef', (c) => c.charCodeAt(0));

/** The two lanes as 16 lowercase hex digits, lane a first (the same text as toString(16) padded to 8 digits each). */
function renderHash(a: number, b: number): BlockHash {
  const h = HEX_CODES;
  return String.fromCharCode(
    h[a >>> 28], h[(a >>> 24) & 15], h[(a >>> 20) & 15], h[(a >>> 16) & 15],
    h[(a >>> 12) & 15], h[(a >>> 8) & 15], h[(a >>> 4) & 15], h[a & 15],
    h[b >>> 28], h[(b >>> 24) & 15], h[(b >>> 20) & 15], h[(b >>> 16) & 15],
    h[(b >>> 12) & 15], h[(b >>> 8) & 15], h[(b >>> 4) & 15], h[b & 15],
  );
}

/** Value of one hex digit's character code ('0'-'9', 'a'-'f', 'A'-'F'); NaN for anything else. */
function hexDigit(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  const lower = code | 0x20;
  return lower >= 97 && lower <= 102 ? lower - 87 : NaN;
}

/** The 8 hex digits of `text` from `offset` as a uint32. */
function parseLane(text: string, offset: number): number {
  let x = 0;
  for (let i = offset; i < offset + 8; i++) x = x * 16 + hexDigit(text.charCodeAt(i));
  return x;
}

/**
 * Lane a (0) or b (1) of a block hash, for tables keyed by the two lanes. For
 * a 16-hex-digit hash the lanes are its value (two keys with the same lanes
 * are the same hash); any other string gets a 64-bit fingerprint of its
 * characters instead, so a table lookup must still confirm the string.
 */
export function blockHashLane(hash: BlockHash, lane: 0 | 1): number {
  // A key is usually looked up in both lanes and in several tables in a row (prefix cache, CPU tier,
  // eviction order): the last key's lanes are kept rather than parsed again.
  if (hash !== lastLaneKey) {
    lastLaneA = computeLane(hash, 0);
    lastLaneB = computeLane(hash, 1);
    lastLaneKey = hash;
  }
  return lane === 0 ? lastLaneA : lastLaneB;
}

let lastLaneKey: BlockHash | null = null;
let lastLaneA = 0;
let lastLaneB = 0;

function computeLane(hash: BlockHash, lane: 0 | 1): number {
  if (hash.length === 16) {
    const value = parseLane(hash, lane * 8);
    if (value === value) return value;
  }
  let x = lane === 0 ? LANE_A_SEED : LANE_B_SEED;
  for (let i = 0; i < hash.length; i++) x = round(x, hash.charCodeAt(i));
  return mix((x ^ hash.length) >>> 0);
}

/** The 16 hex digits of the lanes (a, b): the text form of a hash for logs, JSON and error messages. */
export function formatBlockHash(a: number, b: number): BlockHash {
  return renderHash(a >>> 0, b >>> 0);
}

/** Where chainLanes leaves its result, so the hot loop allocates nothing but the rendered string. */
const lanes = new Uint32Array(2);

/** Both lanes of the block `tokens[start, end)` chained on a parent's lanes (hasParent false: the first block). */
function chainLanes(
  hasParent: boolean,
  parentA: number,
  parentB: number,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
  extraKey: string | null,
): void {
  let a = LANE_A_SEED;
  let b = LANE_B_SEED;
  if (hasParent) {
    a = round(a, parentA);
    a = round(a, parentB);
    b = round(b, parentB);
    b = round(b, parentA);
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
  lanes[0] = mix((a ^ n) >>> 0);
  lanes[1] = mix((b ^ Math.imul(n, 0x27d4eb2f)) >>> 0);
}

/** Hash of the block of `tokens[start, end)` chained on `parent` (null for the first block). */
export function hashBlock(
  parent: BlockHash | null,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
  extraKey: string | null = null,
): BlockHash {
  const hasParent = parent !== null;
  chainLanes(hasParent, hasParent ? parseLane(parent, 0) : 0, hasParent ? parseLane(parent, 8) : 0, tokens, start, end, extraKey);
  return renderHash(lanes[0], lanes[1]);
}

/**
 * Appends the hashes of the full blocks of `tokens` not yet in `hashes`
 * (each block's hash is computed once, as tokens arrive). Within one call the
 * chain continues from the lanes just computed instead of re-parsing them.
 */
export function extendBlockHashes(
  hashes: BlockHash[],
  tokens: ArrayLike<number>,
  numTokens: number,
  blockSize: number,
  extraKey: string | null = null,
): void {
  const full = Math.floor(numTokens / blockSize);
  let i = hashes.length;
  if (i >= full) return;
  let hasParent = i > 0;
  let parentA = hasParent ? parseLane(hashes[i - 1], 0) : 0;
  let parentB = hasParent ? parseLane(hashes[i - 1], 8) : 0;
  for (; i < full; i++) {
    chainLanes(hasParent, parentA, parentB, tokens, i * blockSize, (i + 1) * blockSize, extraKey);
    parentA = lanes[0];
    parentB = lanes[1];
    hasParent = true;
    hashes.push(renderHash(parentA, parentB));
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
