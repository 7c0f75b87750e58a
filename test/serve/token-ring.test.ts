import { describe, expect, it } from 'vitest';
import {
  createRingBuffer,
  FINISH_LENGTH,
  FINISH_STOPPED,
  MIN_RING_WORDS,
  ringWordsFor,
  RingReader,
  RingWriter,
  type FinishCounts,
  type RingVisitor,
} from '../../src/serve/frontend/token-ring.js';

/**
 * The token ring between the engine's thread and the HTTP front end, driven
 * on one thread: what the writer writes, the reader reads whole and in
 * order, however small the ring; nothing is visible before it is published.
 */

type Event = { slot: number; tokens: number[] } | { slot: number; finish: FinishCounts } | { refused: number } | { admitted: number };

/** A writer and a reader over one ring, the reader telling the writer of room as the front end does (here without a message). */
function ring(words: number) {
  const buffer = createRingBuffer(words);
  const writer = new RingWriter(buffer);
  const events: Event[] = [];
  const reader = new RingReader(buffer, () => writer.resume());
  const visitor: RingVisitor = {
    tokens: (slot, tokens) => events.push({ slot, tokens }),
    finish: (slot, finish) => events.push({ slot, finish }),
    refused: (slot) => events.push({ refused: slot }),
    admitted: (count) => events.push({ admitted: count }),
  };
  const read = () => reader.drain(visitor);
  /** Reads until nothing is published or queued (each read makes room, and the writer moves its queue in). */
  const readAll = async (): Promise<void> => {
    for (let i = 0; i < 100_000; i++) {
      await published();
      if (read() === 0 && writer.queued === 0) return;
    }
    throw new Error('the ring never emptied');
  };
  return { writer, reader, events, read, readAll };
}

const finishOf = (completionTokens: number): FinishCounts => ({
  reason: FINISH_LENGTH,
  promptTokens: 7,
  gpuHitTokens: 1,
  cpuHitTokens: 2,
  remoteHitTokens: 1,
  completionTokens,
});

/** Lets the writer's microtask publish run. */
const published = () => Promise.resolve();

describe('token ring', () => {
  it('hands records to the reader in order once published, with the finish counts intact', async () => {
    const { writer, events, read } = ring(64);
    writer.writeTokens(3, [10, 11]);
    writer.writeTokens(4, [20]);
    expect(read()).toBe(0);
    await published();
    writer.writeFinish(3, { ...finishOf(2), reason: FINISH_STOPPED });
    await published();
    read();
    expect(events).toEqual([
      { slot: 3, tokens: [10, 11] },
      { slot: 4, tokens: [20] },
      { slot: 3, finish: { ...finishOf(2), reason: FINISH_STOPPED } },
    ]);
  });

  it('a stream of many times the ring\'s words arrives whole and in order: records that do not fit wait on the writer\'s side', async () => {
    const { writer, events, read, readAll } = ring(MIN_RING_WORDS);
    const expected: number[][] = [[], [], []];
    for (let step = 0; step < 500; step++) {
      for (const slot of [1, 2]) {
        writer.writeTokens(slot, [step * 2 + slot]);
        expected[slot].push(step * 2 + slot);
      }
      // The reader falls behind: it reads every seventh step only.
      if (step % 7 === 0) {
        await published();
        read();
      }
    }
    writer.writeFinish(1, finishOf(500));
    expect(writer.queued).toBeGreaterThan(0);
    await readAll();
    const tokensOf = (slot: number) => events.flatMap((e) => ('tokens' in e && e.slot === slot ? e.tokens : []));
    expect(tokensOf(1)).toEqual(expected[1]);
    expect(tokensOf(2)).toEqual(expected[2]);
    expect(events.at(-1)).toEqual({ slot: 1, finish: finishOf(500) });
  });

  it('a delivery of more tokens than the ring holds is split, not lost', async () => {
    const { writer, events, readAll } = ring(MIN_RING_WORDS);
    const tokens = Array.from({ length: 100 }, (_, i) => i);
    writer.writeTokens(9, tokens);
    await readAll();
    expect(events.flatMap((e) => ('tokens' in e ? e.tokens : []))).toEqual(tokens);
  });

  it('an action queued with after() runs only once the records before it are readable', async () => {
    const { writer, events, read, readAll } = ring(MIN_RING_WORDS);
    for (let i = 0; i < 10; i++) writer.writeTokens(1, [i]);
    const seenAtMessage: number[] = [];
    writer.after(() => {
      read();
      seenAtMessage.push(events.flatMap((e) => ('tokens' in e ? e.tokens : [])).length);
    });
    expect(seenAtMessage).toEqual([]);
    await readAll();
    expect(seenAtMessage).toEqual([10]);
  });

  it('a step\'s records written as a step sink are invisible until the step closes, then read whole and in order', () => {
    const { writer, events, read } = ring(64);
    writer.beginStep(3);
    writer.tokens(1, [10]);
    writer.tokens(2, [20, 21]);
    writer.tokens(3, [30]);
    expect(read()).toBe(0);
    writer.endStep();
    read();
    expect(events).toEqual([
      { slot: 1, tokens: [10] },
      { slot: 2, tokens: [20, 21] },
      { slot: 3, tokens: [30] },
    ]);
  });

  it("an admission a step follows goes out with the step's tokens, ahead of them; one nothing follows is published on its own", async () => {
    const { writer, events, read } = ring(64);
    writer.writeAdmitted(2, true);
    await published();
    expect(read()).toBe(0);
    writer.beginStep(1);
    writer.tokens(5, [50]);
    writer.endStep();
    read();
    expect(events).toEqual([{ admitted: 2 }, { slot: 5, tokens: [50] }]);
    events.length = 0;
    writer.writeAdmitted(1);
    await published();
    read();
    expect(events).toEqual([{ admitted: 1 }]);
  });

  it('a single token handed over as a number makes the record the same token in an array makes, and queues as it does once the step is full', async () => {
    const { writer, events, readAll } = ring(MIN_RING_WORDS);
    const steps = 3;
    for (let step = 0; step < steps; step++) {
      writer.beginStep(12);
      for (let slot = 1; slot <= 12; slot++) writer.token(slot, 100 * step + slot);
      writer.endStep();
    }
    expect(writer.queued).toBeGreaterThan(0);
    await readAll();
    const expected = Array.from({ length: steps }, (_, step) => Array.from({ length: 12 }, (_, i) => ({ slot: i + 1, tokens: [100 * step + i + 1] }))).flat();
    expect(events).toEqual(expected);
  });

  it('steps larger than the room left queue as single writes do: nothing lost, nothing overtaking, finishes after their tokens', async () => {
    const { writer, events, read, readAll } = ring(MIN_RING_WORDS);
    const slots = [1, 2, 3, 4, 5];
    const expected = new Map<number, number[]>(slots.map((slot) => [slot, []]));
    let token = 0;
    for (let step = 0; step < 300; step++) {
      writer.beginStep(slots.length);
      for (const slot of slots) {
        // Now and then a request gets several tokens in a step.
        const tokens = (step + slot) % 11 === 0 ? [token++, token++, token++] : [token++];
        writer.tokens(slot, tokens);
        expected.get(slot)!.push(...tokens);
      }
      writer.endStep();
      if (step === 150) writer.writeFinish(5, finishOf(151));
      if (step === 150) slots.pop();
      // The reader falls behind: it reads every fifth step only.
      if (step % 5 === 0) read();
    }
    expect(writer.queued).toBeGreaterThan(0);
    await readAll();
    const all = events.flatMap((e) => ('tokens' in e ? e.tokens : []));
    expect(all).toEqual([...all].sort((a, b) => a - b));
    for (const [slot, tokens] of expected) expect(events.flatMap((e) => ('tokens' in e && e.slot === slot ? e.tokens : []))).toEqual(tokens);
    const finishAt = events.findIndex((e) => 'finish' in e);
    expect(events[finishAt]).toEqual({ slot: 5, finish: finishOf(151) });
    expect(events.slice(finishAt + 1).some((e) => 'slot' in e && e.slot === 5)).toBe(false);
  });

  it('is sized to hold several steps of every running request, as a power of two', () => {
    expect(ringWordsFor(256)).toBe(16384);
    expect(ringWordsFor(1)).toBe(64);
    expect(() => createRingBuffer(100)).toThrow(/ringWords: expected a power of two/);
  });
});
