import { Encoder } from '@msgpack/msgpack';
import type { BlockHash } from '../core/block-hash.js';
import type { KvCacheEvent, KvEventBatch } from './kv-cache-events.js';

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

function hashes(list: readonly BlockHash[]): bigint[] {
  return list.map(eventBlockHash);
}

/** One event as vLLM's msgspec would write it. */
function wireEvent(event: KvCacheEvent, encoding: KvEventEncoding): unknown {
  switch (event.type) {
    case 'BlockStored': {
      const parent = event.parentBlockHash === null ? null : eventBlockHash(event.parentBlockHash);
      if (encoding === 'array') {
        return [event.type, hashes(event.blockHashes), parent, event.tokenIds, event.blockSize, null, event.medium, null];
      }
      return {
        type: event.type,
        block_hashes: hashes(event.blockHashes),
        parent_block_hash: parent,
        token_ids: event.tokenIds,
        block_size: event.blockSize,
        lora_id: null,
        medium: event.medium,
        lora_name: null,
      };
    }
    case 'BlockRemoved':
      if (encoding === 'array') return [event.type, hashes(event.blockHashes), event.medium];
      return { type: event.type, block_hashes: hashes(event.blockHashes), medium: event.medium };
    case 'AllBlocksCleared':
      return encoding === 'array' ? [event.type] : { type: event.type };
  }
}

/** Encodes batches for one publisher (one encoder, reused). */
export class KvEventWireEncoder {
  private readonly encoder = new Encoder({ useBigInt64: true, ignoreUndefined: true });

  constructor(
    readonly encoding: KvEventEncoding = 'map',
    /** vLLM's `data_parallel_rank`: which data-parallel engine published the batch. */
    readonly dataParallelRank = 0,
  ) {}

  encode(batch: KvEventBatch): Uint8Array {
    const events = batch.events.map((event) => wireEvent(event, this.encoding));
    // encode() returns a copy of the encoder's buffer: the replay buffer may keep it.
    return this.encoder.encode([batch.ts, events, this.dataParallelRank]);
  }
}
