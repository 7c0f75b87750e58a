import type { CompletionSpec } from '../completion-backend.js';
import { createIntRingBuffer, IntRingReader, IntRingWriter, OWN_WORD } from '../../core/shared-int-ring.js';

/**
 * Completions from the HTTP front-end thread to the engine's thread,
 * through a ring of Int32 words in a SharedArrayBuffer: the front end
 * writes each arrival and publishes once per event-loop turn; the engine's
 * serving loop reads what was published at each step boundary. No message
 * per arrival or per turn while the loop steps: it is woken by one message
 * only when it sleeps (it raises IDLE before sleeping, and the writer that
 * publishes after it clears the flag and says so).
 *
 * Record: [slot, maxTokens, seed, promptLength, saltLength (-1: no salt),
 * salt's UTF-16 code units..., prompt tokens...].
 *
 * As in the token ring, nothing is dropped: a record that does not fit
 * waits, with everything after it, in a queue on the writer's side; the
 * writer raises WAITING, and the reader, once it has made room, clears it
 * and asks (by message) for the queue to be moved in.
 */

/** The ring's own control word: raised by the engine's loop before it sleeps. */
const IDLE = OWN_WORD;
const HEAD_WORDS = 5;
const NO_SALT = -1;

/** Longest cache_salt the ring carries (characters); a longer one is refused before it is sent. */
export const MAX_SALT_CHARS = 4096;
const MIN_ARRIVAL_WORDS = 1 << 16;

/**
 * Ring words for a model of `maxModelLen` tokens: at least 64 Ki words
 * (256 KiB: hundreds of arrivals of a few hundred tokens at once), and
 * twice the largest record, so one always fits once the reader caught up.
 */
export function arrivalRingWordsFor(maxModelLen: number): number {
  let words = MIN_ARRIVAL_WORDS;
  while (words < 2 * (HEAD_WORDS + maxModelLen + MAX_SALT_CHARS)) words *= 2;
  return words;
}

export function createArrivalBuffer(ringWords: number): SharedArrayBuffer {
  return createIntRingBuffer(ringWords, 64);
}

/** One arrival as the engine's side reads it, valid only during the visit it is handed to. */
export interface ArrivalSpec {
  /**
   * A view of the ring's words where they lie in one run (a copy where the
   * record wraps the ring's end): the engine copies the prompt once, into
   * its request, so the ring is read with no copy of its own. Valid only
   * during the visit: the writer reuses the words after it.
   */
  readonly promptTokens: Int32Array;
  readonly maxTokens: number;
  readonly seed: number;
  readonly cacheSalt: string | null;
}

/** The front end's side. */
export class ArrivalWriter extends IntRingWriter {
  /** Words a record of this completion takes; more than maxRecordWords cannot be sent. */
  static recordWords(spec: CompletionSpec): number {
    return HEAD_WORDS + (spec.cacheSalt?.length ?? 0) + spec.promptTokens.length;
  }

  /** The largest record: half the ring, so it fits once the reader caught up. */
  get maxRecordWords(): number {
    return this.capacity >> 1;
  }

  /** Writes one arrival (visible once published). `slot` must be >= 1. */
  append(slot: number, spec: CompletionSpec): void {
    const words = ArrivalWriter.recordWords(spec);
    if (words > this.maxRecordWords) throw new RangeError(`an arrival of ${words} words does not fit the arrival ring (at most ${this.maxRecordWords})`);
    if (this.queue.length === 0 && this.room(words)) {
      this.fill(this.ring, this.write, this.mask, slot, spec);
      this.write = (this.write + words) | 0;
      return;
    }
    const record = new Int32Array(words);
    this.fill(record, 0, 0xffffffff, slot, spec);
    this.enqueue(record);
  }

  /**
   * Makes what was written visible to the engine's side. true when its
   * serving loop sleeps and must be woken (by one message): it said so by
   * raising IDLE, which this clears, so one publish wakes it once.
   */
  publish(): boolean {
    this.storeWrite();
    return Atomics.load(this.control, IDLE) === 1 && Atomics.compareExchange(this.control, IDLE, 1, 0) === 1;
  }

  /** Moving queued records in publishes nothing: the front end publishes once per turn (and learns then whether to wake the engine's loop). */
  protected override moved(): void {}

  private fill(into: Int32Array, at: number, mask: number, slot: number, spec: CompletionSpec): void {
    const salt = spec.cacheSalt;
    const saltLength = salt === null ? 0 : salt.length;
    const prompt = spec.promptTokens;
    into[at & mask] = slot;
    into[(at + 1) & mask] = spec.maxTokens;
    into[(at + 2) & mask] = spec.seed;
    into[(at + 3) & mask] = prompt.length;
    into[(at + 4) & mask] = salt === null ? NO_SALT : saltLength;
    let w = at + HEAD_WORDS;
    for (let i = 0; i < saltLength; i++) into[(w + i) & mask] = salt!.charCodeAt(i);
    w += saltLength;
    for (let i = 0; i < prompt.length; i++) into[(w + i) & mask] = prompt[i];
  }
}

/** The engine's side. */
export class ArrivalReader extends IntRingReader {
  /** true when arrivals were published since the last drain (one atomic load: the serving loop asks at every step boundary). */
  get pending(): boolean {
    return this.writePosition() !== this.read;
  }

  /** Hands every published arrival to `visit`, in order; returns how many. */
  drain(visit: (slot: number, spec: ArrivalSpec) => void): number {
    const end = this.writePosition();
    let r = this.read;
    if (r === end) return 0;
    const ring = this.ring;
    const mask = this.mask;
    let count = 0;
    while (r !== end) {
      const slot = ring[r & mask];
      const maxTokens = ring[(r + 1) & mask];
      const seed = ring[(r + 2) & mask] >>> 0;
      const promptLength = ring[(r + 3) & mask];
      const saltLength = ring[(r + 4) & mask];
      let w = r + HEAD_WORDS;
      let cacheSalt: string | null = null;
      if (saltLength !== NO_SALT) {
        const units = new Array<number>(saltLength);
        for (let i = 0; i < saltLength; i++) units[i] = ring[(w + i) & mask];
        cacheSalt = String.fromCharCode(...units);
        w += saltLength;
      }
      const promptTokens = this.view((w & mask) >>> 0, promptLength);
      r = (w + promptLength) | 0;
      count++;
      // The position is stored before the visit: a visit that throws leaves the record read, not read twice.
      this.read = r;
      visit(slot, { promptTokens, maxTokens, seed, cacheSalt });
    }
    this.advance(r);
    return count;
  }

  /** The engine's loop is about to sleep: the next publish tells the writer to wake it (the caller then reads once more, as an arrival may have been published just before). */
  sleeping(): void {
    Atomics.store(this.control, IDLE, 1);
  }

  /** The loop woke: publishes need not wake it. */
  awake(): void {
    Atomics.store(this.control, IDLE, 0);
  }

  /** `length` words from ring index `from`: a view where they do not wrap the ring's end, else a copy. */
  private view(from: number, length: number): Int32Array {
    const ring = this.ring;
    if (from + length <= this.capacity) return ring.subarray(from, from + length);
    const out = new Int32Array(length);
    const first = this.capacity - from;
    out.set(ring.subarray(from));
    out.set(ring.subarray(0, length - first), first);
    return out;
  }
}
