import { Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../src/core/prng.js';
import type { KvCacheEvent, KvEventBatch } from '../../src/events/kv-cache-events.js';
import { blockHashLane } from '../../src/core/block-hash.js';
import { eventBlockHash, eventHashWords, KvEventWireEncoder, type KvEventEncoding } from '../../src/events/vllm-wire.js';
import { hexHash, someBatch } from './random-batches.js';

/**
 * vLLM's structs for a batch, written from its schema (vllm/distributed/kv_events.py)
 * as plain values, for a general msgpack encoder to write: what the fast
 * encoder's bytes must equal.
 */
function vllmStructs(batch: KvEventBatch, encoding: KvEventEncoding, dataParallelRank: number): unknown {
  const event = (e: KvCacheEvent): unknown => {
    if (e.type === 'BlockStored') {
      const fields = {
        type: e.type,
        block_hashes: e.blockHashes.map(eventBlockHash),
        parent_block_hash: e.parentBlockHash === null ? null : eventBlockHash(e.parentBlockHash),
        token_ids: e.tokenIds,
        block_size: e.blockSize,
        lora_id: null,
        medium: e.medium,
        lora_name: null,
      };
      return encoding === 'map' ? fields : Object.values(fields);
    }
    if (e.type === 'BlockRemoved') {
      const fields = { type: e.type, block_hashes: e.blockHashes.map(eventBlockHash), medium: e.medium };
      return encoding === 'map' ? fields : Object.values(fields);
    }
    return encoding === 'map' ? { type: e.type } : [e.type];
  };
  return [batch.ts, batch.events.map(event), dataParallelRank];
}

const reference = new Encoder({ useBigInt64: true, ignoreUndefined: true });

describe('the KV event wire encoder', () => {
  it.each<KvEventEncoding>(['map', 'array'])('writes the bytes a msgpack encoder writes for vLLM’s structs (%s encoding), for any batch', (encoding) => {
    const random = new SeededRandom(42);
    for (const dataParallelRank of [0, 3, 200]) {
      const encoder = new KvEventWireEncoder(encoding, dataParallelRank);
      for (let i = 0; i < 150; i++) {
        const batch = someBatch(random);
        expect(Buffer.from(encoder.encode(batch)).equals(Buffer.from(reference.encode(vllmStructs(batch, encoding, dataParallelRank))))).toBe(true);
      }
    }
  });

  it('hands each batch its own bytes: a later batch does not change an earlier one', () => {
    const encoder = new KvEventWireEncoder('map');
    const first = encoder.encode({ ts: 1, events: [{ type: 'BlockRemoved', blockHashes: ['00000000000000ff'], medium: 'GPU' }] });
    const copy = Buffer.from(first);
    encoder.encode({ ts: 2, events: [{ type: 'AllBlocksCleared' }] });
    expect(Buffer.from(first).equals(copy)).toBe(true);
  });

  it('writes a batch larger than its starting buffer whole', () => {
    const random = new SeededRandom(7);
    const hashes = Array.from({ length: 5000 }, () => hexHash(random, 16));
    const batch: KvEventBatch = { ts: 5.5, events: [{ type: 'BlockRemoved', blockHashes: hashes, medium: 'CPU' }] };
    const encoder = new KvEventWireEncoder('map');
    expect(Buffer.from(encoder.encode(batch)).equals(Buffer.from(reference.encode(vllmStructs(batch, 'map', 0))))).toBe(true);
  });

  it('gives a hash the same words whether the block tables just looked it up or not, a 16-character key that is not hex included', () => {
    const random = new SeededRandom(23);
    const words = new Int32Array(2);
    const asBigInt = (): bigint => (BigInt(words[0] >>> 0) << 32n) | BigInt(words[1] >>> 0);
    const keys = [...Array.from({ length: 50 }, () => hexHash(random, 16)), hexHash(random, 16).toUpperCase(), 'block-0000000001', '0123456789abcdeg'];
    for (const key of keys) {
      eventHashWords(key, words);
      expect(asBigInt()).toBe(eventBlockHash(key));
      // What a table's lookup leaves behind (blockHashLane keeps the last key's lanes) must not change the value.
      blockHashLane(key, 0);
      eventHashWords(key, words);
      expect(asBigInt()).toBe(eventBlockHash(key));
    }
  });
});
