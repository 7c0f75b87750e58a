import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../src/core/prng.js';
import type { BlockTokenSource, HashWords, KvMedium, TierEventSink } from '../../src/events/kv-cache-events.js';
import { KvEventCollectors } from '../../src/events/kv-event-collectors.js';
import { KvEventRecorder } from '../../src/events/kv-event-recorder.js';
import { createKvEventRingBuffer, KvEventRingReader, KvEventRingWriter } from '../../src/events/kv-event-ring.js';
import { eventBlockHash, KvEventWireEncoder } from '../../src/events/vllm-wire.js';
import { lruManager } from '../../src/offload/lru-manager.js';
import { BlockPool } from '../../src/scheduler/block-pool.js';
import { hexHash } from './random-batches.js';

/**
 * The GPU pool and the CPU tier keep each cached block's hash value beside
 * it, as the two words a KV event carries, and hand them to their event
 * sink with the hash: the words follow the hash through caching, eviction
 * and reuse, and what a sink receives is the value of the hash it names.
 */

/** A hash's value as an event carries it: [high, low] of eventBlockHash. */
function valueWords(hash: string): [number, number] {
  const value = eventBlockHash(hash);
  return [Number(value >> 32n) | 0, Number(value & 0xffffffffn) | 0];
}

/** [high, low] pairs of `words` as signed 32-bit numbers, `pairs` of them from pair `from`. */
function pairsOf(words: HashWords, from: number, pairs: number): [number, number][] {
  return Array.from({ length: pairs }, (_, i) => [words[2 * (from + i)] | 0, words[2 * (from + i) + 1] | 0]);
}

type Report =
  | { readonly kind: 'removed'; readonly hash: string; readonly words: [number, number] | null }
  | { readonly kind: 'stored'; readonly hashes: string[]; readonly parent: string | null; readonly words: [number, number][] | null };

/** A sink that records what it is handed, words included (copied: the tier's arrays are its own). */
function recordingSink(blockSize: number, reports: Report[]): TierEventSink {
  return {
    blockSize,
    stored: (hashes, parent, _tokens, words) => reports.push({ kind: 'stored', hashes: [...hashes], parent, words: words === undefined ? null : pairsOf(words, 0, hashes.length) }),
    storedRun: (hashes, from, to, _tokens, words) =>
      reports.push({
        kind: 'stored',
        hashes: hashes.slice(from, to),
        parent: from > 0 ? hashes[from - 1] : null,
        words: words === undefined ? null : pairsOf(words, 0, to - from + 1),
      }),
    removed: (hash) => reports.push({ kind: 'removed', hash, words: null }),
    removedWords: (hash, high, low) => reports.push({ kind: 'removed', hash, words: [high | 0, low | 0] }),
    cleared: () => {},
  };
}

function tokensOf(count: number): BlockTokenSource {
  const tokens = Int32Array.from({ length: count }, (_, i) => i);
  return { tokenAt: (i) => tokens[i], tokensBetween: (a, b) => Array.from(tokens.subarray(a, b)) };
}

function hexHashes(seed: number, n: number): string[] {
  const random = new SeededRandom(seed);
  return Array.from({ length: n }, () => hexHash(random, 16));
}

describe('GPU block pool hash words', () => {
  it('follow a block through caching, eviction and reuse under another hash', () => {
    const pool = new BlockPool(2);
    const [first, second] = hexHashes(1, 2);
    const [block] = pool.allocate(1);
    expect(pool.hashWordsOf(block.id)).toBeNull();
    pool.cacheFullBlockIds([block.id], [first], 0, 1);
    expect(pool.hashWordsOf(block.id)).toEqual(valueWords(first));
    pool.free([block]);
    // Both blocks taken: the cached one is evicted and reused.
    const reused = pool.allocate(2).find((b) => b.id === block.id)!;
    expect(pool.hashWordsOf(block.id)).toBeNull();
    pool.cacheFullBlockIds([reused.id], [second], 0, 1);
    expect(pool.hashWordsOf(block.id)).toEqual(valueWords(second));
    expect(pool.removeFromPrefixCache([block.id])).toBe(1);
    expect(pool.hashWordsOf(block.id)).toBeNull();
  });

  it('are dropped by a reset, and never kept for a key that is not 16 hex digits', () => {
    const pool = new BlockPool(3);
    const blocks = pool.allocate(2);
    pool.cacheFullBlockIds(blocks.map((b) => b.id), [hexHashes(2, 1)[0], 'not-a-hex-key'], 0, 2);
    expect(pool.hashWordsOf(blocks[0].id)).not.toBeNull();
    expect(pool.hashWordsOf(blocks[1].id)).toBeNull();
    pool.reset();
    expect(pool.hashWordsOf(blocks[0].id)).toBeNull();
  });

  it("hand each event the words of the hashes it names: a stored run with its parent's, an eviction its block's", () => {
    const pool = new BlockPool(4);
    const reports: Report[] = [];
    pool.setEventSink(recordingSink(16, reports));
    const table = hexHashes(3, 3);
    const ids = pool.allocate(3).map((b) => b.id);
    pool.cacheFullBlockIds(ids, table, 0, 1, tokensOf(48));
    pool.cacheFullBlockIds(ids, table, 1, 3, tokensOf(48));
    expect(reports).toEqual([
      { kind: 'stored', hashes: [table[0]], parent: null, words: [[0, 0], valueWords(table[0])] },
      { kind: 'stored', hashes: [table[1], table[2]], parent: table[0], words: [valueWords(table[0]), valueWords(table[1]), valueWords(table[2])] },
    ]);
    reports.length = 0;
    pool.free(ids.map((id) => pool.block(id)).reverse());
    pool.allocate(4);
    expect(reports).toEqual([table[2], table[1], table[0]].map((hash) => ({ kind: 'removed', hash, words: valueWords(hash) })));
  });

  it('hand no words where a run\'s parent is not the block cached under its hash, or a key has no such value', () => {
    const pool = new BlockPool(6);
    const reports: Report[] = [];
    pool.setEventSink(recordingSink(16, reports));
    const table = hexHashes(4, 2);
    const held = pool.allocate(1);
    pool.cacheFullBlockIds([held[0].id], [table[0]], 0, 1);
    // A second table with the same first block: its block stays anonymous, so the run after it names a parent it does not hold.
    const twin = pool.allocate(2).map((b) => b.id);
    pool.cacheFullBlockIds(twin, table, 0, 2, tokensOf(32));
    expect(reports.at(-1)).toEqual({ kind: 'stored', hashes: [table[1]], parent: table[0], words: null });
    const odd = pool.allocate(1);
    pool.cacheFullBlockIds([odd[0].id], ['not-a-hex-key'], 0, 1, tokensOf(16));
    expect(reports.at(-1)).toEqual({ kind: 'stored', hashes: ['not-a-hex-key'], parent: null, words: null });
    pool.removeFromPrefixCache([odd[0].id]);
    expect(reports.at(-1)).toEqual({ kind: 'removed', hash: 'not-a-hex-key', words: null });
  });
});

describe('CPU tier hash words', () => {
  it('follow a key through its store, its eviction and the slot\'s reuse, and are never kept for a failed store', () => {
    const manager = lruManager({ capacityBlocks: 1 });
    const [first, second, third] = hexHashes(5, 3);
    const stored = manager.prepareStore([first])!;
    const slot = stored.cpuBlockIds[0];
    expect(manager.keyWordsOf(slot)).toEqual(valueWords(first));
    manager.completeStore([first], true);
    expect(manager.prepareStore([second])!.cpuBlockIds).toEqual([slot]);
    expect(manager.keyWordsOf(slot)).toEqual(valueWords(second));
    manager.completeStore([second], false);
    expect(manager.keyWordsOf(slot)).toBeNull();
    manager.prepareStore(['not-a-hex-key']);
    expect(manager.keyWordsOf(slot)).toBeNull();
    manager.completeStore(['not-a-hex-key'], true);
    manager.prepareStore([third]);
    expect(manager.keyWordsOf(slot)).toEqual(valueWords(third));
  });

  it('hand its events the words of the keys they name; a store with a key of no such value hands none', () => {
    const manager = lruManager({ capacityBlocks: 3 });
    const reports: Report[] = [];
    manager.setEventSink(recordingSink(16, reports));
    const keys = hexHashes(6, 4);
    const out = manager.prepareStore(keys.slice(0, 3))!;
    manager.completeStore(out.keysToStore, true);
    expect(reports).toEqual([{ kind: 'stored', hashes: keys.slice(0, 3), parent: null, words: keys.slice(0, 3).map(valueWords) }]);
    reports.length = 0;
    const evicting = manager.prepareStore([keys[3]])!;
    expect(reports).toEqual(evicting.evictedKeys.map((hash) => ({ kind: 'removed', hash, words: valueWords(hash) })));
    manager.completeStore([keys[3]], true);
    reports.length = 0;
    const mixed = manager.prepareStore(['not-a-hex-key'])!;
    manager.completeStore(mixed.keysToStore, true);
    expect(reports.at(-1)).toEqual({ kind: 'stored', hashes: ['not-a-hex-key'], parent: null, words: null });
  });
});

describe('hash words through the collectors', () => {
  it('a pool and a CPU tier reporting with words make, in the ring and in the recorder side by side, the same bytes', () => {
    const pool = new BlockPool(8);
    const cpu = lruManager({ capacityBlocks: 4 });
    const tiers = [
      { medium: 'GPU' as KvMedium, blockSize: 16, setEventSink: (sink: TierEventSink | null) => pool.setEventSink(sink) },
      { medium: 'CPU' as KvMedium, blockSize: 16, setEventSink: (sink: TierEventSink | null) => cpu.setEventSink(sink) },
    ];
    const collectors = new KvEventCollectors(tiers);
    const recorder = new KvEventRecorder();
    const encoder = new KvEventWireEncoder('map');
    const expected: string[] = [];
    recorder.addListener((batch) => expected.push(Buffer.from(encoder.encode(batch)).toString('hex')));
    const buffer = createKvEventRingBuffer(1 << 12);
    const writer = new KvEventRingWriter(buffer);
    const reader = new KvEventRingReader(buffer, () => writer.resume());
    const bytes: string[] = [];
    collectors.add(recorder);
    collectors.add(writer);
    const random = new SeededRandom(7);
    for (let step = 0; step < 12; step++) {
      // A request's table of 3 blocks, cached in two runs; the CPU tier stores its blocks, evicting older ones.
      const table = Array.from({ length: 3 }, () => hexHash(random, 16));
      const blocks = pool.allocate(3);
      const ids = blocks.map((b) => b.id);
      pool.cacheFullBlockIds(ids, table, 0, 1, tokensOf(48));
      pool.cacheFullBlockIds(ids, table, 1, 3, tokensOf(48));
      const stored = cpu.prepareStore(table);
      if (stored !== null) cpu.completeStore(stored.keysToStore, true);
      pool.free(blocks.reverse());
      collectors.flush();
      reader.drain((batch) => bytes.push(Buffer.from(encoder.encodeRecords(batch)).toString('hex')));
    }
    expect(pool.evictedBlocks).toBeGreaterThan(0);
    expect(expected.length).toBe(12);
    expect(bytes).toEqual(expected);
  });
});
