import { mix } from '../model/mix.js';

/**
 * Chained block hashes: h_i = H_k(h_{i-1}, tokens of block i, extra keys),
 * 64 bits rendered as 16 hex digits (the two 32-bit lanes that tables key on).
 *
 * H_k is SipHash-1-3 under a 128-bit key. The old hash's rounds had
 * structural collisions (for any two tokens a second pair could be computed
 * that collided in one lane, leaving about 2^32 work to match a block);
 * SipHash has none known, so matching a given block takes about 2^64 tries
 * even under a public key. The key is therefore public by default, and hashes
 * are deterministic across processes and machines: engines, and a router that
 * recomputes them from prompts, agree on every block. An engine serving
 * tenants who must not even search offline sets a secret key
 * (KVTIER_BLOCK_HASH_KEY, 32 hex digits, or setBlockHashKey) shared by the
 * processes that must agree. The cache salt is hashed into every block, so
 * tenants with different salts never share a block.
 *
 * Every hash the scheduler keys its tables on comes from this module (the
 * prompt-hashing pool's threads are handed the key with each task), the
 * ranks only see block ids, and remote keys are a separate SHA-256 chain over
 * the tokens (src/remote/remote-keys.ts), so engines sharing a remote tier
 * agree on remote keys whatever their block-hash keys.
 *
 * Hashing runs on the scheduler's hot path (a block completes every
 * blockSize decode steps of every request), so the hash works on 32-bit
 * halves in local state and the hex rendering and parsing below work on
 * character codes: one flat string per hash, no intermediate strings.
 */
/** 16 lowercase hex digits: the 64-bit hash, most significant digit first (lane a, then lane b). */
export type BlockHash = string;

/** The 128-bit block-hash key as four 32-bit words (k0 low, k0 high, k1 low, k1 high). */
export type BlockHashKey = readonly [number, number, number, number];

const LANE_A_SEED = 0x6b767469; // "kvti"
const LANE_B_SEED = 0x65723031; // "er01"
const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** One murmur3 round: only for the table fingerprint of keys that are not block hashes (computeLane). */
function round(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) >>> 0;
}

// ---------------------------------------------------------------- SipHash-1-3

/** The environment variable that sets a secret block-hash key: 32 hex digits (128 bits). */
export const BLOCK_HASH_KEY_ENV = 'KVTIER_BLOCK_HASH_KEY';

/** The public default key ("kvtier block hash"), so hashes agree across processes unless a secret is set. */
export const DEFAULT_BLOCK_HASH_KEY: BlockHashKey = [0x6b767469, 0x65722062, 0x6c6f636b, 0x20686173];

/** The key, as four uint32 words. */
let key0 = 0;
let key1 = 0;
let key2 = 0;
let key3 = 0;
setBlockHashKey(DEFAULT_BLOCK_HASH_KEY);
const environmentKey = parseBlockHashKey(process.env[BLOCK_HASH_KEY_ENV]);
if (environmentKey instanceof Array) setBlockHashKey(environmentKey);

/**
 * Reads a key written as 32 hex digits (the first 16 are k0, the rest k1,
 * each little-endian as SipHash's reference vectors write them). Returns
 * null when `text` is undefined or empty, and a message naming the problem
 * when it is not a key.
 */
export function parseBlockHashKey(text: string | undefined): BlockHashKey | null | string {
  if (text === undefined || text === '') return null;
  const hex = text.trim();
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) {
    return `${BLOCK_HASH_KEY_ENV}: expected 32 hex digits (a 128-bit key), got ${hex.length} characters`;
  }
  const bytes = Buffer.from(hex, 'hex');
  return [bytes.readUInt32LE(0), bytes.readUInt32LE(4), bytes.readUInt32LE(8), bytes.readUInt32LE(12)];
}

/** Why the environment's block-hash key was not taken, or null when it is unset or valid. */
export function blockHashKeyEnvironmentProblem(): string | null {
  return typeof environmentKey === 'string' ? environmentKey : null;
}

/** The key this process hashes blocks under (handed to the prompt-hashing pool's threads). */
export function blockHashKey(): BlockHashKey {
  return [key0, key1, key2, key3];
}

/**
 * Hashes blocks under `key` from now on: for threads that hash for the
 * scheduler, and for processes that must agree on block hashes (a shared
 * secret key). Hashes computed before stay under the old key, so it is set
 * before any engine runs.
 */
export function setBlockHashKey(key: BlockHashKey): void {
  if (key.length !== 4 || !key.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffffffff)) {
    throw new RangeError('block hash key: expected four unsigned 32-bit integers');
  }
  [key0, key1, key2, key3] = key;
}

/** The message being hashed: 8-byte words as (low, high) int32 pairs, grown as salts need. */
let msg = new Int32Array(64);

/** Room for `words` message words. */
function msgRoom(words: number): void {
  if (msg.length < 2 * words) msg = new Int32Array(2 * words + 64);
}

/**
 * SipHash-1-3 of the first `words` words of `msg`; the 64-bit result is left
 * in `lanes` (high half first). All arithmetic is on int32 halves in locals
 * (a 64-bit add carries from the low half to the high one; a rotation by 32
 * swaps the halves), which keeps V8 on small integers.
 */
function sipHash(words: number): void {
  // k0 = (key1:key0), k1 = (key3:key2); the constants spell "somepseudorandomlygeneratedbytes".
  let v0h = key1 ^ 0x736f6d65;
  let v0l = key0 ^ 0x70736575;
  let v1h = key3 ^ 0x646f7261;
  let v1l = key2 ^ 0x6e646f6d;
  let v2h = key1 ^ 0x6c796765;
  let v2l = key0 ^ 0x6e657261;
  let v3h = key3 ^ 0x74656462;
  let v3l = key2 ^ 0x79746573;
  let lo = 0;
  let t = 0;
  let ml = 0;
  let mh = 0;
  // One compression round per message word (the last carries the length in bytes, mod 256, in its
  // top byte), then three finalization rounds: SipHash-1-3.
  const rounds = words + 1 + 3;
  for (let r = 0; r < rounds; r++) {
    const compressing = r <= words;
    if (compressing) {
      ml = r < words ? msg[2 * r] : 0;
      mh = r < words ? msg[2 * r + 1] : ((words * 8) & 0xff) << 24;
      v3h ^= mh;
      v3l ^= ml;
    }
    // SipRound: v0 += v1; v1 <<<= 13; v1 ^= v0; v0 <<<= 32; v2 += v3; v3 <<<= 16; v3 ^= v2;
    //           v0 += v3; v3 <<<= 21; v3 ^= v0; v2 += v1; v1 <<<= 17; v1 ^= v2; v2 <<<= 32
    lo = (v0l + v1l) | 0;
    v0h = (v0h + v1h + (((v0l & v1l) | ((v0l | v1l) & ~lo)) >>> 31)) | 0;
    v0l = lo;
    t = (v1h << 13) | (v1l >>> 19);
    v1l = ((v1l << 13) | (v1h >>> 19)) ^ v0l;
    v1h = t ^ v0h;
    t = v0h;
    v0h = v0l;
    v0l = t;
    lo = (v2l + v3l) | 0;
    v2h = (v2h + v3h + (((v2l & v3l) | ((v2l | v3l) & ~lo)) >>> 31)) | 0;
    v2l = lo;
    t = (v3h << 16) | (v3l >>> 16);
    v3l = ((v3l << 16) | (v3h >>> 16)) ^ v2l;
    v3h = t ^ v2h;
    lo = (v0l + v3l) | 0;
    v0h = (v0h + v3h + (((v0l & v3l) | ((v0l | v3l) & ~lo)) >>> 31)) | 0;
    v0l = lo;
    t = (v3h << 21) | (v3l >>> 11);
    v3l = ((v3l << 21) | (v3h >>> 11)) ^ v0l;
    v3h = t ^ v0h;
    lo = (v2l + v1l) | 0;
    v2h = (v2h + v1h + (((v2l & v1l) | ((v2l | v1l) & ~lo)) >>> 31)) | 0;
    v2l = lo;
    t = (v1h << 17) | (v1l >>> 15);
    v1l = ((v1l << 17) | (v1h >>> 15)) ^ v2l;
    v1h = t ^ v2h;
    t = v2h;
    v2h = v2l;
    v2l = t;
    if (compressing) {
      v0h ^= mh;
      v0l ^= ml;
      if (r === words) v2l ^= 0xff;
    }
  }
  lanes[0] = v0h ^ v1h ^ v2h ^ v3h;
  lanes[1] = v0l ^ v1l ^ v2l ^ v3l;
}

/** SipHash-1-3 of the 8-byte words given as (low, high) pairs, under the current key: for checks against reference vectors. */
export function sipHashWords(words: ArrayLike<number>): BlockHash {
  const n = words.length >> 1;
  msgRoom(n);
  for (let i = 0; i < 2 * n; i++) msg[i] = words[i] | 0;
  sipHash(n);
  return renderHash(lanes[0], lanes[1]);
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
export function hexDigit(code: number): number {
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
    const aIsValue = laneIsValue;
    lastLaneB = computeLane(hash, 1);
    lastLanesAreValue = aIsValue && laneIsValue;
    lastLaneKey = hash;
  }
  return lane === 0 ? lastLaneA : lastLaneB;
}

/**
 * Whether the lanes of `hash` (blockHashLane) are its value, (high, low):
 * true for 16 hex digits, the words a KV event carries. A tier that keeps
 * the lanes of its keys beside them (for its table) then hands KV events
 * the words with no lookup or parse of the text.
 */
export function blockHashLanesAreValue(hash: BlockHash): boolean {
  blockHashLane(hash, 0);
  return lastLanesAreValue;
}

let lastLaneKey: BlockHash | null = null;
let lastLaneA = 0;
let lastLaneB = 0;
/** The last key is 16 hex digits: its lanes are its value, not a fingerprint. */
let lastLanesAreValue = false;
/** Whether the last computeLane parsed the lane as hex digits. */
let laneIsValue = false;

/**
 * The value of `hash` as two 32-bit words (high, low) into `out`, when it
 * is the key whose lanes were looked up last and is 16 hex digits: the
 * tables' lookup just parsed it (a block evicted, cached or found), so a
 * KV event about it costs no second parse. false otherwise.
 */
export function lastLookedUpHashWords(hash: BlockHash, out: Int32Array): boolean {
  if (hash !== lastLaneKey || !lastLanesAreValue) return false;
  out[0] = lastLaneA;
  out[1] = lastLaneB;
  return true;
}

// ------------------------------------------------------ recently made hashes

/**
 * The words of the hashes this thread made recently, so a KV event about a
 * block whose hash the hasher just made (a block filled this step, its
 * parent, the same key stored on the CPU tier) costs no parse. Direct-mapped
 * by the low 14 bits of the low word (the last digits of the text): a slot
 * keeps the newest hash made into it, so each later hash forgets a given one
 * with odds 1 in 16384. A parent hashed a block earlier (256 hashes later at
 * 256 decoding requests with 16-token blocks, plus the arrivals' prompts) is
 * nearly always still found. Every entry is a hash's text and its own value,
 * so a hit is always right, whatever the key. 256 KiB per thread that hashes.
 */
const RECENT_SLOTS = 1 << 14;
const RECENT_MASK = RECENT_SLOTS - 1;
const recentHashes: (BlockHash | null)[] = new Array<BlockHash | null>(RECENT_SLOTS).fill(null);
const recentWords = new Int32Array(2 * RECENT_SLOTS);

/** Remembers the words of `hash`, just rendered from lanes (a, b). */
function rememberRecent(hash: BlockHash, a: number, b: number): void {
  const slot = b & RECENT_MASK;
  recentHashes[slot] = hash;
  recentWords[2 * slot] = a;
  recentWords[2 * slot + 1] = b;
}

/** A hex digit's value from its character code, without a branch ('0'-'9', 'a'-'f', 'A'-'F'; garbage for anything else). */
function digitOf(code: number): number {
  return (code & 15) + 9 * ((code >> 6) & 1);
}

/**
 * The value of `hash` as two 32-bit words (high, low) into `out`, when this
 * thread's hasher made it recently or the tables looked it up last (see
 * lastLookedUpHashWords): no parse. false otherwise (the caller parses).
 */
export function knownHashWords(hash: BlockHash, out: Int32Array): boolean {
  if (lastLookedUpHashWords(hash, out)) return true;
  if (hash.length !== 16) return false;
  const slot =
    (digitOf(hash.charCodeAt(15)) | (digitOf(hash.charCodeAt(14)) << 4) | (digitOf(hash.charCodeAt(13)) << 8) | (digitOf(hash.charCodeAt(12)) << 12)) &
    RECENT_MASK;
  // The slot's text was rendered from its words: the same text has the same value.
  if (recentHashes[slot] !== hash) return false;
  out[0] = recentWords[2 * slot];
  out[1] = recentWords[2 * slot + 1];
  return true;
}

function computeLane(hash: BlockHash, lane: 0 | 1): number {
  laneIsValue = false;
  if (hash.length === 16) {
    const value = parseLane(hash, lane * 8);
    if (value === value) {
      laneIsValue = true;
      return value;
    }
  }
  let x = lane === 0 ? LANE_A_SEED : LANE_B_SEED;
  for (let i = 0; i < hash.length; i++) x = round(x, hash.charCodeAt(i));
  return mix((x ^ hash.length) >>> 0);
}

/** The 16 hex digits of the lanes (a, b): the text form of a hash for logs, JSON and error messages. */
export function formatBlockHash(a: number, b: number): BlockHash {
  return renderHash(a >>> 0, b >>> 0);
}

/** Where sipHash leaves its result, so the hot loop allocates nothing but the rendered string. */
const lanes = new Uint32Array(2);

/**
 * Both lanes of the block `tokens[start, end)` chained on a parent's lanes
 * (hasParent false: the first block). The message is one word of lengths and
 * flags, the parent, the salt's length, the tokens two to a word, then the
 * salt's UTF-16 code units four to a word: its fields' lengths come first, so
 * two different inputs never give the same message. An empty salt is no salt.
 */
function chainLanes(
  hasParent: boolean,
  parentA: number,
  parentB: number,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
  extraKey: string | null,
): void {
  const n = end - start;
  const salt = extraKey === null ? 0 : extraKey.length;
  msgRoom(3 + ((n + 1) >> 1) + ((salt + 3) >> 2));
  const m = msg;
  m[0] = n;
  m[1] = (hasParent ? 1 : 0) | (salt > 0 ? 2 : 0);
  let at = 2;
  if (hasParent) {
    m[at++] = parentA;
    m[at++] = parentB;
  }
  if (salt > 0) {
    m[at++] = salt;
    m[at++] = 0;
  }
  for (let i = start; i < end; i++) m[at++] = tokens[i];
  if ((n & 1) === 1) m[at++] = 0;
  for (let c = 0; c < salt; c += 2) m[at++] = (extraKey as string).charCodeAt(c) | (c + 1 < salt ? (extraKey as string).charCodeAt(c + 1) << 16 : 0);
  if ((at & 1) === 1) m[at++] = 0;
  sipHash(at >> 1);
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
  const hash = renderHash(lanes[0], lanes[1]);
  rememberRecent(hash, lanes[0], lanes[1]);
  return hash;
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
    const hash = renderHash(parentA, parentB);
    rememberRecent(hash, parentA, parentB);
    hashes.push(hash);
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
