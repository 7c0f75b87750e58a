/**
 * The integer form of KV events, shared by the ring that carries them
 * (kv-event-ring.ts) and the encoder that writes them in vLLM's format
 * (vllm-wire.ts): record kinds, and the batch the ring's reader hands on.
 */

/** Record and event kinds (the medium is part of the kind). */
export const KIND_STORED_GPU = 1;
export const KIND_STORED_CPU = 2;
export const KIND_REMOVED_GPU = 3;
export const KIND_REMOVED_CPU = 4;
export const KIND_CLEARED = 5;
export const KIND_STORED_MORE = 6;
export const KIND_END = 7;

/** Per event of a batch as the reader hands it on: these fields, in this order. */
export const EVENT_KIND = 0;
export const EVENT_HASH_AT = 1;
export const EVENT_HASHES = 2;
export const EVENT_TOKEN_AT = 3;
export const EVENT_TOKENS = 4;
export const EVENT_BLOCK_SIZE = 5;
export const EVENT_HAS_PARENT = 6;
export const EVENT_PARENT_HIGH = 7;
export const EVENT_PARENT_LOW = 8;
export const EVENT_FIELDS = 9;

/**
 * One step's events as integers: `events` holds EVENT_FIELDS words per
 * event; an event's hashes are words [hashAt, hashAt + 2 x hashes) of
 * `hashes` (high, low each), its tokens [tokenAt, tokenAt + tokens) of
 * `tokens`. Valid only during the call it is handed to.
 */
export interface KvRecordBatch {
  readonly ts: number;
  readonly eventCount: number;
  readonly events: Int32Array;
  readonly hashes: Int32Array;
  readonly tokens: Int32Array;
}

