import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../src/core/prng.js';
import type { BlockTokenSource, KvEventBatch, KvEventCollector, KvMedium, TierEventSink } from '../../src/events/kv-cache-events.js';
import { KvEventRecorder } from '../../src/events/kv-event-recorder.js';
import { createKvEventRingBuffer, KvEventRingReader, KvEventRingWriter, MIN_KV_EVENT_RING_WORDS } from '../../src/events/kv-event-ring.js';
import { KvEventWireEncoder } from '../../src/events/vllm-wire.js';
import { hexHash, someBatch } from './random-batches.js';

/**
 * The ring that carries KV events from the engine's thread to the KV event
 * thread, driven on one thread: the tiers' reports written as integers and
 * read back make the same batches, byte for byte once encoded, as the
 * in-process recorder makes of the same reports; however small the ring.
 */

/** One step's reports, as the tiers make them: replayed into any collector. */
type Step = { readonly ts: number; readonly report: (sink: (medium: KvMedium, blockSize: number) => TierEventSink) => void };

/** The reports that would make `batch`'s events (a removal of n hashes is n removals). */
function stepOf(batch: KvEventBatch): Step {
  return {
    ts: batch.ts,
    report: (sink) => {
      for (const event of batch.events) {
        if (event.type === 'BlockStored') sink(event.medium, event.blockSize).stored(event.blockHashes, event.parentBlockHash, event.tokenIds);
        else if (event.type === 'BlockRemoved') for (const hash of event.blockHashes) sink(event.medium, 1).removed(hash);
        else sink('GPU', 1).cleared();
      }
    },
  };
}

function play(collector: KvEventCollector, step: Step): void {
  step.report((medium, blockSize) => collector.sinkFor(medium, blockSize));
  collector.flush(step.ts);
}

/** The bytes the in-process path writes for these steps: the recorder's batches, encoded. */
function recorderBytes(steps: readonly Step[]): string[] {
  const recorder = new KvEventRecorder();
  const encoder = new KvEventWireEncoder('map');
  const out: string[] = [];
  recorder.addListener((batch) => out.push(Buffer.from(encoder.encode(batch)).toString('hex')));
  for (const step of steps) play(recorder, step);
  return out;
}

/** A writer and a reader over one ring; the reader tells the writer of room as the KV event thread does (here without a message). */
function ring(words: number) {
  const buffer = createKvEventRingBuffer(words);
  const writer = new KvEventRingWriter(buffer);
  const reader = new KvEventRingReader(buffer, () => writer.resume());
  const encoder = new KvEventWireEncoder('map');
  const bytes: string[] = [];
  const read = (): number => reader.drain((batch) => bytes.push(Buffer.from(encoder.encodeRecords(batch)).toString('hex')));
  /** Reads until nothing is published or queued (each read makes room, and the writer moves its queue in). */
  const readAll = (): void => {
    for (let i = 0; i < 1_000_000; i++) if (read() === 0 && writer.queued === 0) return;
    throw new Error('the ring never emptied');
  };
  return { writer, reader, bytes, read, readAll };
}

/** A request's tokens as a block table's run reads them; with `copies`, a source that copies runs itself (each copy counted). */
function tokenSource(tokens: Int32Array, copies: boolean, counted: () => void = () => {}): BlockTokenSource {
  const source: BlockTokenSource = { tokenAt: (i) => tokens[i], tokensBetween: (a, b) => Array.from(tokens.subarray(a, b)) };
  if (!copies) return source;
  return {
    ...source,
    copyTokens: (start, end, into, at) => {
      counted();
      into.set(tokens.subarray(start, end), at);
    },
  };
}

function randomSteps(seed: number, count: number): Step[] {
  const random = new SeededRandom(seed);
  return Array.from({ length: count }, () => stepOf(someBatch(random)));
}

describe('KV event ring', () => {
  it("hands over each step's batch whole and in order, its bytes those the in-thread encoder writes for the recorder's batch", () => {
    const steps = randomSteps(3, 200);
    const { writer, bytes, read } = ring(1 << 16);
    for (const step of steps) {
      play(writer, step);
      read();
    }
    const expected = recorderBytes(steps);
    expect(expected.length).toBeGreaterThan(150);
    expect(bytes).toEqual(expected);
    expect(writer.written).toBe(expected.length);
    expect(writer.handedOn).toBe(expected.length);
  });

  it('shows nothing of a step until the step ends, and a step without events makes no batch', () => {
    const { writer, bytes, read } = ring(1 << 10);
    const gpu = writer.sinkFor('GPU', 16);
    gpu.removed('00000000000000aa');
    expect(read()).toBe(0);
    writer.flush(1);
    writer.flush(2);
    expect(read()).toBeGreaterThan(0);
    expect(bytes).toEqual(recorderBytes([{ ts: 1, report: (sink) => sink('GPU', 16).removed('00000000000000aa') }]));
    expect(writer.written).toBe(1);
  });

  it('loses nothing in a burst many times the ring, events larger than the ring included: what does not fit waits on the writer\'s side', () => {
    const random = new SeededRandom(9);
    const steps = randomSteps(5, 150);
    // A prompt's chain far longer than the ring, and a CPU tier storing many blocks at once.
    const chain = Array.from({ length: 40 }, () => hexHash(random, 16));
    const chainTokens = Array.from({ length: 40 * 16 }, () => random.below(128_256));
    const parent = hexHash(random, 16);
    steps.splice(60, 0, {
      ts: 7.25,
      report: (sink) => {
        sink('GPU', 16).stored(chain, parent, chainTokens);
        sink('CPU', 64).stored(chain.slice(0, 30), null, []);
        for (const hash of chain) sink('GPU', 16).removed(hash);
      },
    });
    const { writer, bytes, readAll } = ring(MIN_KV_EVENT_RING_WORDS);
    for (const step of steps) play(writer, step);
    expect(writer.queued).toBeGreaterThan(0);
    readAll();
    expect(bytes).toEqual(recorderBytes(steps));
  });

  it("a run of a block table given by range makes the batch the same run given as arrays makes, whether it fits the ring or waits for room", () => {
    const random = new SeededRandom(13);
    const table = Array.from({ length: 12 }, () => hexHash(random, 16));
    const tokens = Int32Array.from({ length: 12 * 16 }, () => random.below(128_256));
    const source = tokenSource(tokens, false);
    const runs: [number, number][] = [[0, 3], [3, 4], [5, 12]];
    const asArrays: Step = {
      ts: 3.5,
      report: (sink) => {
        for (const [from, to] of runs) sink('GPU', 16).stored(table.slice(from, to), from > 0 ? table[from - 1] : null, Array.from(tokens.subarray(from * 16, to * 16)));
      },
    };
    const expected = recorderBytes([asArrays, asArrays]);
    for (const words of [1 << 12, MIN_KV_EVENT_RING_WORDS]) {
      const { writer, bytes, readAll } = ring(words);
      const gpu = writer.sinkFor('GPU', 16);
      for (let step = 0; step < 2; step++) {
        for (const [from, to] of runs) gpu.storedRun!(table, from, to, source);
        writer.flush(3.5);
      }
      readAll();
      expect(bytes).toEqual(expected);
    }
  });

  it("a run whose source copies its tokens itself makes the same batches, runs that wrap the ring's end included", () => {
    const random = new SeededRandom(17);
    const table = Array.from({ length: 12 }, () => hexHash(random, 16));
    const tokens = Int32Array.from({ length: 12 * 16 }, () => random.below(128_256));
    const runs: [number, number][] = [[0, 3], [3, 4], [4, 9]];
    const steps = 7;
    const asArrays: Step = {
      ts: 4.5,
      report: (sink) => {
        for (const [from, to] of runs) sink('GPU', 16).stored(table.slice(from, to), from > 0 ? table[from - 1] : null, Array.from(tokens.subarray(from * 16, to * 16)));
      },
    };
    const expected = recorderBytes(Array.from({ length: steps }, () => asArrays));
    // Read after every step: the write position moves on around a ring smaller than a few steps, so runs straddle its end.
    const { writer, bytes, readAll } = ring(512);
    const gpu = writer.sinkFor('GPU', 16);
    let copies = 0;
    const source = tokenSource(tokens, true, () => copies++);
    for (let step = 0; step < steps; step++) {
      for (const [from, to] of runs) gpu.storedRun!(table, from, to, source);
      writer.flush(4.5);
      readAll();
    }
    expect(bytes).toEqual(expected);
    expect(copies).toBeGreaterThan(0);
    expect(copies).toBeLessThan(steps * runs.length);
  });

  it("reports handing over their hashes' words make the batches the same reports by text make, whether they fit the ring or wait for room", () => {
    const random = new SeededRandom(19);
    const table = Array.from({ length: 6 }, () => hexHash(random, 16));
    const tokens = Int32Array.from({ length: 6 * 16 }, () => random.below(128_256));
    const gone = Array.from({ length: 4 }, () => hexHash(random, 16));
    const words = (hashes: readonly string[]): Int32Array => {
      const out = new Int32Array(2 * hashes.length);
      hashes.forEach((hash, i) => {
        out[2 * i] = Number.parseInt(hash.slice(0, 8), 16) | 0;
        out[2 * i + 1] = Number.parseInt(hash.slice(8), 16) | 0;
      });
      return out;
    };
    const byText: Step = {
      ts: 5.5,
      report: (sink) => {
        for (const hash of gone) sink('GPU', 16).removed(hash);
        sink('GPU', 16).stored(table.slice(0, 2), null, Array.from(tokens.subarray(0, 32)));
        sink('GPU', 16).stored(table.slice(2, 6), table[1], Array.from(tokens.subarray(32, 96)));
        sink('CPU', 16).stored(table.slice(0, 3), null, []);
        for (const hash of gone) sink('CPU', 16).removed(hash);
      },
    };
    const expected = recorderBytes([byText, byText, byText]);
    for (const size of [1 << 12, MIN_KV_EVENT_RING_WORDS]) {
      const { writer, bytes, readAll } = ring(size);
      const gpu = writer.sinkFor('GPU', 16);
      const cpu = writer.sinkFor('CPU', 16);
      const source = tokenSource(tokens, true);
      for (let step = 0; step < 3; step++) {
        for (const hash of gone) gpu.removedWords!(hash, ...(Array.from(words([hash])) as [number, number]));
        // A run's words start with its parent's pair (zeros for none).
        gpu.storedRun!(table, 0, 2, source, Int32Array.from([0, 0, ...words(table.slice(0, 2))]));
        gpu.storedRun!(table, 2, 6, source, words(table.slice(1, 6)));
        cpu.stored(table.slice(0, 3), null, [], words(table.slice(0, 3)));
        for (const hash of gone) cpu.removedWords!(hash, ...(Array.from(words([hash])) as [number, number]));
        writer.flush(5.5);
      }
      if (size === MIN_KV_EVENT_RING_WORDS) expect(writer.queued).toBeGreaterThan(0);
      readAll();
      expect(bytes).toEqual(expected);
    }
  });

  it('a reader waiting for records wakes once a step ends, and finds at once what was published while it read', async () => {
    const { writer, reader, read } = ring(1 << 10);
    let woke = false;
    const waiting = reader.published().then(() => {
      woke = true;
    });
    const turns = async (): Promise<void> => {
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    };
    await turns();
    expect(woke).toBe(false);
    writer.sinkFor('GPU', 16).removed('00000000000000aa');
    await turns();
    expect(woke).toBe(false);
    writer.flush(1);
    await waiting;
    expect(read()).toBeGreaterThan(0);
    // Published while the reader was awake: no wake-up is needed, and none is waited for.
    writer.sinkFor('CPU', 16).removed('00000000000000bb');
    writer.flush(2);
    await reader.published();
    expect(read()).toBeGreaterThan(0);
    expect(writer.written).toBe(2);
  });

  it('runs an action queued behind records only once they are in the ring', () => {
    const { writer, bytes, readAll } = ring(MIN_KV_EVENT_RING_WORDS);
    const steps = randomSteps(11, 20);
    for (const step of steps) play(writer, step);
    let queuedWhenRun: number | null = null;
    writer.after(() => {
      queuedWhenRun = writer.queued;
    });
    expect(writer.queued).toBeGreaterThan(1);
    expect(queuedWhenRun).toBeNull();
    readAll();
    expect(queuedWhenRun).toBe(0);
    expect(bytes).toEqual(recorderBytes(steps));
  });
});
