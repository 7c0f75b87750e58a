import { Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../src/core/prng.js';
import type { KvCacheEvent, KvEventBatch, KvMedium } from '../../src/events/kv-cache-events.js';
import { eventBlockHash, KvEventWireEncoder, type KvEventEncoding } from '../../src/events/vllm-wire.js';

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

function hexHash(random: SeededRandom, digits: number): string {
  let text = '';
  for (let i = 0; i < digits; i++) text += '0123456789abcdef'[random.below(16)];
  return text;
}

/** A hash as the caches name blocks (16 hex digits), and now and then a wider, shorter, upper-case or non-hex one. */
function someHash(random: SeededRandom): string {
  switch (random.below(8)) {
    case 0:
      return hexHash(random, 32);
    case 1:
      return hexHash(random, 1 + random.below(15));
    case 2:
      return hexHash(random, 16).toUpperCase();
    case 3:
      return `block-${random.below(1000)}`;
    default:
      return hexHash(random, 16);
  }
}

/** A token id of every msgpack integer width: fixint, uint 8, uint 16, uint 32. */
function someToken(random: SeededRandom): number {
  const widths = [0x80, 0x100, 0x10000, 0x100000000];
  return random.below(widths[random.below(widths.length)]);
}

function someBatch(random: SeededRandom): KvEventBatch {
  const events: KvCacheEvent[] = [];
  const count = random.below(40);
  for (let i = 0; i < count; i++) {
    const medium: KvMedium = random.below(2) === 0 ? 'GPU' : 'CPU';
    const kind = random.below(10);
    if (kind < 6) {
      const blocks = 1 + random.below(20);
      events.push({
        type: 'BlockStored',
        blockHashes: Array.from({ length: blocks }, () => someHash(random)),
        parentBlockHash: random.below(3) === 0 ? null : someHash(random),
        tokenIds: medium === 'CPU' ? [] : Array.from({ length: blocks * 16 }, () => someToken(random)),
        blockSize: [1, 16, 200, 70_000][random.below(4)],
        medium,
      });
    } else if (kind < 9) {
      events.push({ type: 'BlockRemoved', blockHashes: Array.from({ length: 1 + random.below(20) }, () => someHash(random)), medium });
    } else {
      events.push({ type: 'AllBlocksCleared' });
    }
  }
  // Wall-clock seconds with a fraction, and now and then a whole second (an integer on the wire).
  const ts = random.below(4) === 0 ? 1_700_000_000 + random.below(1000) : 1_700_000_000 + random.below(1_000_000) / 1000;
  return { ts, events };
}

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
});
