import { hexDigit, knownHashWords, type BlockHash } from '../core/block-hash.js';
import type { KvCacheEvent, KvEventBatch, KvMedium } from './kv-cache-events.js';
import {
  EVENT_BLOCK_SIZE,
  EVENT_FIELDS,
  EVENT_HASH_AT,
  EVENT_HASHES,
  EVENT_HAS_PARENT,
  EVENT_KIND,
  EVENT_PARENT_HIGH,
  EVENT_PARENT_LOW,
  EVENT_TOKEN_AT,
  EVENT_TOKENS,
  KIND_CLEARED,
  KIND_REMOVED_CPU,
  KIND_REMOVED_GPU,
  KIND_STORED_CPU,
  KIND_STORED_GPU,
  type KvRecordBatch,
} from './kv-event-records.js';
import { concatBytes, encodeString, MsgpackWriter } from './msgpack-writer.js';

/**
 * KV event batches in the wire format of vLLM's `vllm/distributed/kv_events.py`:
 * msgspec structs encoded with msgpack.
 *
 * - The batch (`KVEventBatch`) is a positional array `[ts, events, data_parallel_rank]`.
 * - Each event is a tagged struct (`tag=True`: the tag is the class name). vLLM
 *   encodes it as a map with the tag under "type" (`map`, its format since it
 *   dropped `array_like` from the event structs); older vLLM releases, and the
 *   routers built for them, use a positional array with the tag first (`array`):
 *     BlockStored      [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name]
 *     BlockRemoved     [tag, block_hashes, medium]
 *     AllBlocksCleared [tag]
 * - Block hashes are unsigned 64-bit integers (vLLM's integer `ExternalBlockHash`).
 *
 * kvtier has no LoRA adapters: `lora_id` and `lora_name` are always nil.
 */
export type KvEventEncoding = 'map' | 'array';

export const KV_EVENT_ENCODINGS = ['map', 'array'] as const satisfies readonly KvEventEncoding[];

const UINT64_BITS = 64;

/**
 * A block hash as events carry it: kvtier's hash (hex digits) as an unsigned
 * 64-bit integer, its low 64 bits if it is wider (as vLLM folds its own
 * hashes). Every event hash goes through here, so a change of hash width
 * changes this one function. A key that is not hex (a test's label) is
 * hashed into 64 bits instead.
 */
export function eventBlockHash(hash: BlockHash): bigint {
  if (/^[0-9a-f]+$/i.test(hash)) return BigInt.asUintN(UINT64_BITS, BigInt(`0x${hash}`));
  let h = 0xcbf29ce484222325n;
  for (let i = 0; i < hash.length; i++) h = BigInt.asUintN(UINT64_BITS, (h ^ BigInt(hash.charCodeAt(i))) * 0x100000001b3n);
  return h;
}

/** The value of hex digits [from, to) of `text` (at most 8), or -1 if one is not a hex digit. */
function hexWord(text: string, from: number, to: number): number {
  let word = 0;
  for (let i = from; i < to; i++) {
    const digit = hexDigit(text.charCodeAt(i));
    if (digit !== digit) return -1;
    word = word * 16 + digit;
  }
  return word;
}

/**
 * eventBlockHash(hash) as two 32-bit words, high then low, into `out` (read
 * them with >>> 0): without a BigInt for kvtier's hex hashes. The engine's
 * side of the KV event ring and the encoder both go through here.
 */
export function eventHashWords(hash: BlockHash, out: Int32Array): void {
  // Most event hashes were made by this thread's hasher recently, or looked up by the caches' tables just before: their words are at hand.
  if (knownHashWords(hash, out)) return;
  const n = hash.length;
  // The low 64 bits are the last 16 digits (all of kvtier's own form); every digit must still be hex, or the hash is not a number.
  if (n > 0 && (n <= 16 || hexWord(hash, 0, n - 16) >= 0)) {
    const low = hexWord(hash, Math.max(0, n - 8), n);
    const high = n > 8 ? hexWord(hash, Math.max(0, n - 16), n - 8) : 0;
    if (low >= 0 && high >= 0) {
      out[0] = high;
      out[1] = low;
      return;
    }
  }
  const value = eventBlockHash(hash);
  out[0] = Number(value >> 32n);
  out[1] = Number(value & 0xffffffffn);
}

const hashWords = new Int32Array(2);

/** Writes eventBlockHash(hash) as msgpack's unsigned 64-bit integer. */
function writeHash(out: MsgpackWriter, hash: BlockHash): void {
  eventHashWords(hash, hashWords);
  out.uint64(hashWords[0], hashWords[1]);
}

function writeHashes(out: MsgpackWriter, list: readonly BlockHash[]): void {
  out.arrayHeader(list.length);
  for (let i = 0; i < list.length; i++) writeHash(out, list[i]);
}

const NIL = Uint8Array.of(0xc0);
const key = encodeString;
const MEDIUMS = ['GPU', 'CPU'] as const;

/**
 * Each event's constant runs (headers, keys, tags, the nil LoRA fields),
 * encoded once: an event is these runs with its hashes, tokens and block size
 * written between them.
 */
interface EventRuns {
  /** BlockStored up to its block hashes. */
  readonly storedHead: Uint8Array;
  /** Between the block hashes and the parent hash. */
  readonly beforeParent: Uint8Array;
  /** Between the parent hash and the token ids. */
  readonly beforeTokens: Uint8Array;
  /** Between the token ids and the block size. */
  readonly beforeBlockSize: Uint8Array;
  /** After the block size: lora_id, medium, lora_name, per medium. */
  readonly storedTail: Record<KvMedium, Uint8Array>;
  /** BlockRemoved up to its block hashes. */
  readonly removedHead: Uint8Array;
  /** After the block hashes: the medium, per medium. */
  readonly removedTail: Record<KvMedium, Uint8Array>;
  /** The whole AllBlocksCleared event. */
  readonly cleared: Uint8Array;
}

function eventRuns(encoding: KvEventEncoding): EventRuns {
  const map = encoding === 'map';
  // A map writes each field's name before its value; an array only the values, in vLLM's field order.
  const field = (name: string): Uint8Array => (map ? key(name) : new Uint8Array(0));
  const header = (fields: number) => Uint8Array.of((map ? 0x80 : 0x90) | fields);
  const perMedium = (runs: (medium: Uint8Array) => Uint8Array): Record<KvMedium, Uint8Array> => ({
    GPU: runs(encodeString(MEDIUMS[0])),
    CPU: runs(encodeString(MEDIUMS[1])),
  });
  return {
    storedHead: concatBytes(header(8), field('type'), encodeString('BlockStored'), field('block_hashes')),
    beforeParent: field('parent_block_hash'),
    beforeTokens: field('token_ids'),
    beforeBlockSize: field('block_size'),
    storedTail: perMedium((medium) => concatBytes(field('lora_id'), NIL, field('medium'), medium, field('lora_name'), NIL)),
    removedHead: concatBytes(header(3), field('type'), encodeString('BlockRemoved'), field('block_hashes')),
    removedTail: perMedium((medium) => concatBytes(field('medium'), medium)),
    cleared: concatBytes(header(1), field('type'), encodeString('AllBlocksCleared')),
  };
}

/** One event as vLLM's msgspec writes it: a map tagged by "type", or a positional array with the tag first. */
function writeEvent(out: MsgpackWriter, event: KvCacheEvent, runs: EventRuns): void {
  switch (event.type) {
    case 'BlockStored':
      out.raw(runs.storedHead);
      writeHashes(out, event.blockHashes);
      out.raw(runs.beforeParent);
      if (event.parentBlockHash === null) out.nil();
      else writeHash(out, event.parentBlockHash);
      out.raw(runs.beforeTokens);
      out.numbers(event.tokenIds);
      out.raw(runs.beforeBlockSize);
      out.number(event.blockSize);
      out.raw(runs.storedTail[event.medium]);
      return;
    case 'BlockRemoved':
      out.raw(runs.removedHead);
      writeHashes(out, event.blockHashes);
      out.raw(runs.removedTail[event.medium]);
      return;
    case 'AllBlocksCleared':
      out.raw(runs.cleared);
      return;
  }
}

/** Encodes batches for one publisher (one buffer, reused). */
export class KvEventWireEncoder {
  private readonly out = new MsgpackWriter();
  private readonly runs: EventRuns;

  constructor(
    readonly encoding: KvEventEncoding = 'map',
    /** vLLM's `data_parallel_rank`: which data-parallel engine published the batch. */
    readonly dataParallelRank = 0,
  ) {
    this.runs = eventRuns(encoding);
  }

  /** The batch `[ts, events, data_parallel_rank]` as msgpack, in a buffer of its own (the replay buffer may keep it). */
  encode(batch: KvEventBatch): Uint8Array {
    const out = this.out;
    out.reset();
    out.arrayHeader(3);
    out.number(batch.ts);
    out.arrayHeader(batch.events.length);
    for (const event of batch.events) writeEvent(out, event, this.runs);
    out.number(this.dataParallelRank);
    return out.take();
  }

  /** The same bytes as encode() for a batch read from the KV event ring (kv-event-ring.ts) as integers. */
  encodeRecords(batch: KvRecordBatch): Uint8Array {
    const out = this.out;
    const runs = this.runs;
    const { events, hashes, tokens } = batch;
    out.reset();
    out.arrayHeader(3);
    out.number(batch.ts);
    out.arrayHeader(batch.eventCount);
    const end = batch.eventCount * EVENT_FIELDS;
    for (let e = 0; e < end; e += EVENT_FIELDS) {
      const kind = events[e + EVENT_KIND];
      if (kind === KIND_STORED_GPU || kind === KIND_STORED_CPU) {
        out.raw(runs.storedHead);
        writeHashWords(out, hashes, events[e + EVENT_HASH_AT], events[e + EVENT_HASHES]);
        out.raw(runs.beforeParent);
        if (events[e + EVENT_HAS_PARENT] === 0) out.nil();
        else out.uint64(events[e + EVENT_PARENT_HIGH], events[e + EVENT_PARENT_LOW]);
        out.raw(runs.beforeTokens);
        const at = events[e + EVENT_TOKEN_AT];
        out.uint32s(tokens, at, at + events[e + EVENT_TOKENS]);
        out.raw(runs.beforeBlockSize);
        out.number(events[e + EVENT_BLOCK_SIZE]);
        out.raw(runs.storedTail[kind === KIND_STORED_GPU ? 'GPU' : 'CPU']);
      } else if (kind === KIND_REMOVED_GPU || kind === KIND_REMOVED_CPU) {
        out.raw(runs.removedHead);
        writeHashWords(out, hashes, events[e + EVENT_HASH_AT], events[e + EVENT_HASHES]);
        out.raw(runs.removedTail[kind === KIND_REMOVED_GPU ? 'GPU' : 'CPU']);
      } else if (kind === KIND_CLEARED) {
        out.raw(runs.cleared);
      } else {
        throw new Error(`KV event record batch: unknown event kind ${kind}`);
      }
    }
    out.number(this.dataParallelRank);
    return out.take();
  }
}

/** `count` hashes as (high, low) words of `words` from `at`, as an array of unsigned 64-bit integers. */
function writeHashWords(out: MsgpackWriter, words: Int32Array, at: number, count: number): void {
  out.arrayHeader(count);
  for (let i = 0; i < count; i++) out.uint64(words[at + 2 * i], words[at + 2 * i + 1]);
}
