import { describe, expect, it } from 'vitest';
import type { CompletionSpec } from '../../src/serve/completion-backend.js';
import { arrivalRingWordsFor, ArrivalReader, ArrivalWriter, createArrivalBuffer, MAX_SALT_CHARS, type ArrivalSpec } from '../../src/serve/frontend/arrival-ring.js';

/**
 * The arrival ring between the HTTP front end and the engine's thread,
 * driven on one thread: what the front end writes, the engine's side reads
 * whole and in order once published, however small the ring; a publish
 * asks to wake the engine's loop only when that loop said it sleeps.
 */

interface Read {
  readonly slot: number;
  readonly promptTokens: number[];
  readonly maxTokens: number;
  readonly seed: number;
  readonly cacheSalt: string | null;
}

function arrivalRing(words: number) {
  const buffer = createArrivalBuffer(words);
  const writer = new ArrivalWriter(buffer);
  const read: Read[] = [];
  const reader = new ArrivalReader(buffer, () => writer.resume());
  const visit = (slot: number, spec: ArrivalSpec) => read.push({ slot, ...spec, promptTokens: Array.from(spec.promptTokens) });
  const drain = () => reader.drain(visit);
  return { writer, reader, read, drain };
}

function completion(length: number, seed: number, cacheSalt: string | null = null): CompletionSpec {
  return { promptTokens: Array.from({ length }, (_, i) => (seed * 31 + i) % 50_000), maxTokens: 5 + (seed % 7), seed, cacheSalt };
}

describe('arrival ring', () => {
  it('hands arrivals to the engine side whole and in order once published, salts and full-range seeds intact', () => {
    const { writer, read, drain } = arrivalRing(64);
    const specs = [completion(3, 1), completion(5, 0xffffffff, 'tenant-é'), completion(0, 2, '')];
    specs.forEach((spec, i) => writer.append(i + 1, spec));
    expect(drain()).toBe(0);
    writer.publish();
    expect(drain()).toBe(3);
    expect(read).toEqual(specs.map((spec, i) => ({ slot: i + 1, ...spec })));
  });

  it("many times the ring's words of arrivals arrive whole and in order: those that do not fit wait on the writer's side", () => {
    const { writer, read, drain } = arrivalRing(64);
    const specs = Array.from({ length: 200 }, (_, i) => completion(1 + (i % 15), i, i % 3 === 0 ? `salt-${i}` : null));
    specs.forEach((spec, i) => {
      writer.append(i + 1, spec);
      // The engine's side falls behind: it reads every ninth arrival only.
      if (i % 9 === 0) {
        writer.publish();
        drain();
      }
    });
    expect(writer.queued).toBeGreaterThan(0);
    for (let i = 0; i < 1000 && (writer.queued > 0 || read.length < specs.length); i++) {
      writer.publish();
      drain();
    }
    expect(read).toEqual(specs.map((spec, i) => ({ slot: i + 1, ...spec })));
  });

  it('a publish asks for a wake only after the engine side said it sleeps, and only once', () => {
    const { writer, reader, drain } = arrivalRing(64);
    writer.append(1, completion(2, 1));
    expect(writer.publish()).toBe(false);
    drain();
    reader.sleeping();
    writer.append(2, completion(2, 2));
    expect(writer.publish()).toBe(true);
    writer.append(3, completion(2, 3));
    expect(writer.publish()).toBe(false);
    reader.sleeping();
    reader.awake();
    writer.append(4, completion(2, 4));
    expect(writer.publish()).toBe(false);
    expect(drain()).toBe(3);
  });

  it('tells the engine side there is something to read only once published', () => {
    const { writer, reader, drain } = arrivalRing(64);
    expect(reader.pending).toBe(false);
    writer.append(1, completion(2, 1));
    expect(reader.pending).toBe(false);
    writer.publish();
    expect(reader.pending).toBe(true);
    drain();
    expect(reader.pending).toBe(false);
  });

  it('is sized for the longest prompt and salt twice over, and refuses a record beyond half of it', () => {
    const words = arrivalRingWordsFor(100_000);
    expect(words & (words - 1)).toBe(0);
    expect(words).toBeGreaterThanOrEqual(2 * (100_000 + MAX_SALT_CHARS));
    expect(arrivalRingWordsFor(16)).toBe(1 << 16);
    const { writer } = arrivalRing(64);
    expect(() => writer.append(1, completion(40, 1))).toThrow(/an arrival of 45 words does not fit the arrival ring \(at most 32\)/);
    expect(() => createArrivalBuffer(100)).toThrow(/ringWords: expected a power of two/);
  });
});
