import type { StepTokenSink } from '../step-token-sink.js';
import { createIntRingBuffer, IntRingReader, IntRingWriter, nextPowerOfTwo, OWN_WORD, WRITE, waitAsync } from '../../core/shared-int-ring.js';

/**
 * The tokens of every request, from the engine's thread to the HTTP
 * front-end thread, through a ring of Int32 words in a SharedArrayBuffer:
 * the writer (main thread) appends records during a step's delivery and
 * publishes them once, with one Atomics.store and one Atomics.notify; the
 * reader (front-end thread) waits with Atomics.waitAsync. No message, copy
 * or promise per token on the scheduler's thread.
 *
 * Records (a request is known by its slot, a positive number the front end
 * gives it; a record's first word tells its kind):
 * - one token, a decode step's usual delivery: [slot, token]
 * - tokens: [TOKENS, slot, n, token_1 .. token_n]
 * - finish: [FINISH, slot, reason, promptTokens, gpuHit, cpuHit, remoteHit, completionTokens]
 *   (reason: FINISH_LENGTH or FINISH_STOPPED; requests that end with an
 *   error or an abort end by message, which carries the error's text).
 * - refused: [REFUSED, slot]: the engine refused the completion read from
 *   the arrival ring with this slot; the error follows by message.
 * - admitted: [ADMITTED, n]: the next n completions read from the arrival
 *   ring (in its order) are answered: queued, unless refused just before.
 *   When one of them was queued, it goes out with the next step's tokens
 *   (the serving loop steps right after reading arrivals), one publish for both.
 *
 * During a step's delivery the writer is the serving loop's StepTokenSink:
 * beginStep looks for room for the whole step once, each one-token record
 * is then two stores, and endStep publishes.
 *
 * The writer never drops or overwrites a record: one that does not fit
 * goes to a queue on the writer's side, as does everything after it; the
 * writer raises WAITING, and the reader, once it has made room, clears it
 * and asks (by message) for the queue to be moved in. Ordered hand-offs
 * (messages that must follow a request's records) can be queued behind
 * the records as callbacks (after()).
 */

/** The ring's own control word: the serving state. */
const STATE = OWN_WORD;

/** Kinds of the records that do not start with a slot (slots are >= 1). */
export const RECORD_TOKENS = -1;
export const RECORD_FINISH = -2;
export const RECORD_ADMITTED = -3;
export const RECORD_REFUSED = -4;
const ANSWER_WORDS = 2;
export const FINISH_LENGTH = 0;
export const FINISH_STOPPED = 1;
const FINISH_WORDS = 8;
const TOKENS_HEAD_WORDS = 3;
const ONE_TOKEN_WORDS = 2;

/** The engine side's state, read by the front end's /health and completions without a message. */
export const STATE_SERVING = 0;
export const STATE_DRAINING = 1;
export const STATE_STOPPED = 2;
export type ServingState = typeof STATE_SERVING | typeof STATE_DRAINING | typeof STATE_STOPPED;

const SETTLED = Promise.resolve();

/** Steps of records the ring holds before the writer queues (the front end may fall this many steps behind). */
const STEPS_HELD = 4;
/** Smallest ring: a test may ask for a tiny one to drive the queue. */
export const MIN_RING_WORDS = 16;

/**
 * Ring words for `maxNumSeqs` running requests: a step gives each at most
 * one token (a 2-word record; 4 words in the general form, counted here)
 * and one finish record (8 words), so a step writes at most maxNumSeqs x 12
 * words; the ring holds STEPS_HELD
 * such steps, rounded up to a power of two (256 requests: 16,384 words,
 * 64 KiB). Fuller steps (several tokens per request) still never lose a
 * record: they queue.
 */
export function ringWordsFor(maxNumSeqs: number): number {
  return nextPowerOfTwo(Math.max(MIN_RING_WORDS, maxNumSeqs * (TOKENS_HEAD_WORDS + 1 + FINISH_WORDS) * STEPS_HELD));
}

export function createRingBuffer(ringWords: number): SharedArrayBuffer {
  return createIntRingBuffer(ringWords, MIN_RING_WORDS);
}

/** A finished request's counts, as a finish record carries them. */
export interface FinishCounts {
  readonly reason: typeof FINISH_LENGTH | typeof FINISH_STOPPED;
  readonly promptTokens: number;
  readonly gpuHitTokens: number;
  readonly cpuHitTokens: number;
  readonly remoteHitTokens: number;
  readonly completionTokens: number;
}

export class RingWriter extends IntRingWriter implements StepTokenSink {
  /** Most tokens in one record: half the ring, so a record always fits once the reader caught up. */
  private readonly maxRecordTokens: number;
  private publishScheduled = false;
  private readonly publishTask = (): void => this.publish();
  /**
   * Within a step (beginStep .. endStep): the write position up to which
   * one-token records may be written with no other check (the reader's
   * position as seen at beginStep plus the ring's size). Anything that
   * queues sets it to the write position, so nothing overtakes the queue.
   */
  private stepLimit = 0;

  constructor(buffer: SharedArrayBuffer) {
    super(buffer);
    this.maxRecordTokens = (this.capacity >> 1) - TOKENS_HEAD_WORDS;
  }

  setState(state: ServingState): void {
    Atomics.store(this.control, STATE, state);
  }

  /** `slot` must be >= 1: its sign tells a one-token record from the others. */
  writeTokens(slot: number, tokens: readonly number[]): void {
    const n = tokens.length;
    if (n === 1 && this.queue.length === 0 && this.room(ONE_TOKEN_WORDS)) {
      const w = this.write;
      this.ring[w & this.mask] = slot;
      this.ring[(w + 1) & this.mask] = tokens[0];
      this.write = (w + ONE_TOKEN_WORDS) | 0;
      if (!this.publishScheduled) this.schedulePublish();
      return;
    }
    // A record must fit the ring to ever leave the queue: a long delivery goes as several.
    const most = this.maxRecordTokens;
    if (n > most) {
      for (let i = 0; i < n; i += most) this.writeTokens(slot, tokens.slice(i, i + most));
      return;
    }
    if (this.queue.length === 0 && this.room(TOKENS_HEAD_WORDS + n)) {
      const ring = this.ring;
      const mask = this.mask;
      let w = this.write;
      ring[w & mask] = RECORD_TOKENS;
      ring[(w + 1) & mask] = slot;
      ring[(w + 2) & mask] = n;
      w += TOKENS_HEAD_WORDS;
      for (let i = 0; i < n; i++) ring[(w + i) & mask] = tokens[i];
      this.write = (w + n) | 0;
    } else {
      const record = new Int32Array(TOKENS_HEAD_WORDS + n);
      record[0] = RECORD_TOKENS;
      record[1] = slot;
      record[2] = n;
      for (let i = 0; i < n; i++) record[TOKENS_HEAD_WORDS + i] = tokens[i];
      this.enqueue(record);
    }
    if (!this.publishScheduled) this.schedulePublish();
  }

  /** Opens a step's delivery of at most `records` requests' tokens: looks for their room once. */
  beginStep(records: number): void {
    if (this.queue.length > 0) {
      this.stepLimit = this.write;
      return;
    }
    // room() reads the reader's position again only when the last one seen leaves too little.
    this.room(records * ONE_TOKEN_WORDS);
    this.stepLimit = (this.read + this.capacity) | 0;
  }

  /** One request's tokens within a step (StepTokenSink): `slot` as for writeTokens. */
  tokens(slot: number, tokens: readonly number[]): void {
    const w = this.write;
    if (tokens.length === 1 && ((this.stepLimit - w) | 0) >= ONE_TOKEN_WORDS) {
      this.ring[w & this.mask] = slot;
      this.ring[(w + 1) & this.mask] = tokens[0];
      this.write = (w + ONE_TOKEN_WORDS) | 0;
      return;
    }
    this.writeTokens(slot, tokens);
    // It may have queued: the rest of the step goes through writeTokens' checks.
    this.stepLimit = this.write;
  }

  /** One request's one token within a step (StepTokenSink.token): the usual decode delivery, a two-word record. */
  token(slot: number, token: number): void {
    const w = this.write;
    if (((this.stepLimit - w) | 0) >= ONE_TOKEN_WORDS) {
      const ring = this.ring;
      const mask = this.mask;
      ring[w & mask] = slot;
      ring[(w + 1) & mask] = token;
      this.write = (w + ONE_TOKEN_WORDS) | 0;
      return;
    }
    this.tokens(slot, [token]);
  }

  /** Closes a step's delivery: publishes it (one store, one notify). */
  endStep(): void {
    this.stepLimit = this.write;
    this.publish();
  }

  writeFinish(slot: number, counts: FinishCounts): void {
    if (this.queue.length === 0 && this.room(FINISH_WORDS)) {
      // Straight into the ring: no record array per finish.
      const ring = this.ring;
      const mask = this.mask;
      const w = this.write;
      ring[w & mask] = RECORD_FINISH;
      ring[(w + 1) & mask] = slot;
      ring[(w + 2) & mask] = counts.reason;
      ring[(w + 3) & mask] = counts.promptTokens;
      ring[(w + 4) & mask] = counts.gpuHitTokens;
      ring[(w + 5) & mask] = counts.cpuHitTokens;
      ring[(w + 6) & mask] = counts.remoteHitTokens;
      ring[(w + 7) & mask] = counts.completionTokens;
      this.write = (w + FINISH_WORDS) | 0;
    } else {
      this.enqueue(Int32Array.of(RECORD_FINISH, slot, counts.reason, counts.promptTokens, counts.gpuHitTokens, counts.cpuHitTokens, counts.remoteHitTokens, counts.completionTokens));
    }
    if (!this.publishScheduled) this.schedulePublish();
  }

  /** Answers arrivals (see the record kinds above): `slot` refused, its error to follow by message. */
  writeRefused(slot: number): void {
    this.writeAnswer(RECORD_REFUSED, slot);
  }

  /**
   * Answers the next `count` arrivals: each queued unless refused just
   * before. With `stepPublishes`, the caller knows a step's delivery opens
   * this writer as a step sink next (it queued one of them with this writer
   * as its step sink, and the serving loop steps next): the answer goes out
   * with the next publish, that step's (endStep) at the latest, not one of
   * its own, so the front end is woken once for both.
   */
  writeAdmitted(count: number, stepPublishes = false): void {
    this.writeAnswer(RECORD_ADMITTED, count, stepPublishes);
  }

  private writeAnswer(kind: number, value: number, stepPublishes = false): void {
    if (this.queue.length === 0 && this.room(ANSWER_WORDS)) {
      const w = this.write;
      this.ring[w & this.mask] = kind;
      this.ring[(w + 1) & this.mask] = value;
      this.write = (w + ANSWER_WORDS) | 0;
    } else this.enqueue(Int32Array.of(kind, value));
    if (!this.publishScheduled && !stepPublishes) this.schedulePublish();
  }

  /**
   * Runs `action` once every record written so far is published: now when
   * nothing is queued, else when the queue has drained up to here (so a
   * message about a request never overtakes its records).
   */
  after(action: () => void): void {
    if (this.queue.length === 0) {
      this.publish();
      action();
    } else this.queue.push(action);
  }

  /** Makes what was written visible to the reader and wakes it. Once per step (scheduled as a microtask by the writes). */
  publish(): void {
    this.publishScheduled = false;
    if (this.storeWrite()) Atomics.notify(this.control, WRITE);
  }

  /** Queued records moved in, or a queued action about to run: what came before is published first. */
  protected override moved(): void {
    this.publish();
  }

  protected override enqueue(record: Int32Array): void {
    // Nothing overtakes the queue: the rest of a step goes through writeTokens' checks.
    this.stepLimit = this.write;
    super.enqueue(record);
  }

  private schedulePublish(): void {
    if (this.publishScheduled) return;
    this.publishScheduled = true;
    // A reaction on a settled promise: a microtask as queueMicrotask's, without the async resource it makes for each call (a few hundred ns on the engine's thread).
    void SETTLED.then(this.publishTask);
  }
}

/** What the reader hands its records to. */
export interface RingVisitor {
  /** `tokens` is fresh: the visitor may keep it. */
  tokens(slot: number, tokens: number[]): void;
  finish(slot: number, counts: FinishCounts): void;
  /** The arrival with this slot was refused; its error comes by message. */
  refused(slot: number): void;
  /** The next `count` arrivals are answered (queued unless refused). */
  admitted(count: number): void;
}

export class RingReader extends IntRingReader {
  get state(): ServingState {
    return Atomics.load(this.control, STATE) as ServingState;
  }

  /** Hands every published record to `visitor`, in order; returns how many words were read. */
  drain(visitor: RingVisitor): number {
    const ring = this.ring;
    const mask = this.mask;
    const end = this.writePosition();
    const start = this.read;
    let r = start;
    while (r !== end) {
      const kind = ring[r & mask];
      if (kind > 0) {
        const token = ring[(r + 1) & mask];
        r = (r + ONE_TOKEN_WORDS) | 0;
        visitor.tokens(kind, [token]);
        continue;
      }
      const slot = ring[(r + 1) & mask];
      if (kind === RECORD_TOKENS) {
        const n = ring[(r + 2) & mask];
        const tokens = new Array<number>(n);
        for (let i = 0; i < n; i++) tokens[i] = ring[(r + TOKENS_HEAD_WORDS + i) & mask];
        r = (r + TOKENS_HEAD_WORDS + n) | 0;
        visitor.tokens(slot, tokens);
      } else if (kind === RECORD_FINISH) {
        const at = (i: number): number => ring[(r + i) & mask];
        const counts: FinishCounts = {
          reason: at(2) === FINISH_STOPPED ? FINISH_STOPPED : FINISH_LENGTH,
          promptTokens: at(3),
          gpuHitTokens: at(4),
          cpuHitTokens: at(5),
          remoteHitTokens: at(6),
          completionTokens: at(7),
        };
        r = (r + FINISH_WORDS) | 0;
        visitor.finish(slot, counts);
      } else if (kind === RECORD_REFUSED) {
        r = (r + ANSWER_WORDS) | 0;
        visitor.refused(slot);
      } else if (kind === RECORD_ADMITTED) {
        r = (r + ANSWER_WORDS) | 0;
        visitor.admitted(slot);
      } else {
        throw new Error(`token ring: unknown record kind ${kind} at word ${r}`);
      }
    }
    if (r === start) return 0;
    this.advance(r);
    return (r - start) | 0;
  }

  /** Resolves once the writer has published past what was read (at once if it has). */
  async published(): Promise<void> {
    const wait = waitAsync(this.control, WRITE, this.read);
    if (wait.async) await wait.value;
  }
}
