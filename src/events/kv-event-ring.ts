import type { BlockHash } from '../core/block-hash.js';
import { createIntRingBuffer, IntRingReader, IntRingWriter, OWN_WORD, SECOND_OWN_WORD, WRITE, waitAsync } from '../core/shared-int-ring.js';
import { storedRunArrays, type BlockTokenSource, type HashWords, type KvEventCollector, type KvMedium, type TierEventSink } from './kv-cache-events.js';
import {
  EVENT_BLOCK_SIZE,
  EVENT_FIELDS,
  EVENT_HASH_AT,
  EVENT_HASHES,
  EVENT_HAS_PARENT,
  EVENT_KIND,
  EVENT_PARENT_HIGH,
  EVENT_PARENT_LOW,
  EVENT_TOKEN_AT,
  EVENT_TOKENS,
  KIND_CLEARED,
  KIND_END,
  KIND_REMOVED_CPU,
  KIND_REMOVED_GPU,
  KIND_STORED_CPU,
  KIND_STORED_GPU,
  KIND_STORED_MORE,
  type KvRecordBatch,
} from './kv-event-records.js';
import { eventHashWords } from './vllm-wire.js';

/**
 * KV events from the engine's thread to the KV event thread, as integer
 * records in a ring of Int32 words in a SharedArrayBuffer: the engine's
 * thread only copies each event's integers (block hashes as two 32-bit
 * words, tokens, block size) into the ring and publishes once per step
 * (one Atomics.store; an Atomics.notify only when the reader sleeps); the
 * other thread builds the batch, encodes it in vLLM's format and hands it
 * to ZeroMQ. The reader raises SLEEPING before it waits and reads
 * everything published before it sleeps again, so a reader kept busy (or
 * reading on a timer's cadence, as the KV event thread does while steps
 * come) is never woken, and the engine's thread never notifies it.
 *
 * Records (the first word is the kind; the medium is part of it):
 * - stored: [STORED_GPU | STORED_CPU with its flags, hashes n, (tokens m),
 *   blockSize, (parentHigh, parentLow), n x (high, low), m tokens]; the
 *   flags beside the kind say which words in brackets are left out: the
 *   parent's where there is none, and the token count where it is n x
 *   blockSize (a chain of whole blocks, as the GPU stores) or 0 (the CPU
 *   tier's keys), so a step's usual records carry nothing they imply
 * - more of the stored event just before (an event too large for one
 *   record): [STORED_MORE, hashes n, tokens m, n x (high, low), m tokens]
 * - removed: [REMOVED_GPU | REMOVED_CPU, high, low], one hash each; the
 *   reader joins consecutive removals of one tier in a step into one event,
 *   as the in-process recorder does
 * - cleared: [CLEARED]
 * - end of a step's batch: [END, ts as a float64's two words]
 *
 * A word holds a token id (an integer in [0, 2^32), read back as unsigned).
 * As in the token ring, nothing is dropped: a record that does not fit waits
 * on the writer's side with everything after it, and the reader, having made
 * room, has the writer's resume() called. The ring's own control word counts
 * the batches the reader has handed on, so the engine's side can wait for it.
 */

const MORE_HEAD = 3;
/** A record's kind is its first word's low bits; a stored record's flags sit above them. */
const KIND_MASK = 0xff;
const HAS_PARENT = 0x100;
/** m = n x blockSize: no count word. */
const WHOLE_BLOCKS = 0x200;
/** m = 0: no count word. */
const NO_TOKENS = 0x400;

/** Words of a stored record's head for these counts. */
function storedHeadWords(n: number, m: number, blockSize: number, hasParent: boolean): number {
  return 3 + (m === n * blockSize || m === 0 ? 0 : 1) + (hasParent ? 2 : 0);
}

/** Writes a stored record's head into `into` from index `at` (each index masked by `mask`: -1 for a record array of its own); returns the index after it. */
function writeStoredHeadInto(
  into: Int32Array,
  at: number,
  mask: number,
  kind: number,
  n: number,
  m: number,
  blockSize: number,
  hasParent: boolean,
  parentHigh: number,
  parentLow: number,
): number {
  const countless = m === n * blockSize ? WHOLE_BLOCKS : m === 0 ? NO_TOKENS : 0;
  into[at & mask] = kind | countless | (hasParent ? HAS_PARENT : 0);
  into[(at + 1) & mask] = n;
  let w = (at + 2) | 0;
  if (countless === 0) {
    into[w & mask] = m;
    w = (w + 1) | 0;
  }
  into[w & mask] = blockSize;
  w = (w + 1) | 0;
  if (hasParent) {
    into[w & mask] = parentHigh;
    into[(w + 1) & mask] = parentLow;
    w = (w + 2) | 0;
  }
  return w;
}
const REMOVED_WORDS = 3;
const END_WORDS = 3;

/** The ring's own control words: batches the reader has handed on, and the reader's flag that it waits to be woken. */
const HANDED_ON = OWN_WORD;
const SLEEPING = SECOND_OWN_WORD;

/** Smallest ring: a test may ask for a tiny one to drive the queue and the split of large events. */
export const MIN_KV_EVENT_RING_WORDS = 32;
/** Default ring: 1 MiB, hundreds of steps of a saturated engine's events. */
export const DEFAULT_KV_EVENT_RING_WORDS = 1 << 18;

export function createKvEventRingBuffer(ringWords: number = DEFAULT_KV_EVENT_RING_WORDS): SharedArrayBuffer {
  return createIntRingBuffer(ringWords, MIN_KV_EVENT_RING_WORDS);
}

/** The engine's side: a KvEventCollector whose sinks write records. */
export class KvEventRingWriter extends IntRingWriter implements KvEventCollector {
  /** Largest record: half the ring, so a record always fits once the reader caught up. */
  private readonly maxRecordWords: number;
  private recordedInStep = false;
  private batches = 0;
  private readonly hash = new Int32Array(2);
  private readonly tsWords = new Int32Array(2);
  private readonly tsValue = new Float64Array(this.tsWords.buffer);

  constructor(buffer: SharedArrayBuffer) {
    super(buffer);
    this.maxRecordWords = this.capacity >> 1;
  }

  sinkFor(medium: KvMedium, blockSize: number): TierEventSink {
    const storedKind = medium === 'GPU' ? KIND_STORED_GPU : KIND_STORED_CPU;
    const removedKind = medium === 'GPU' ? KIND_REMOVED_GPU : KIND_REMOVED_CPU;
    return {
      blockSize,
      stored: (hashes, parent, tokenIds, words) => this.stored(storedKind, blockSize, hashes, parent, tokenIds, words),
      storedRun: (hashes, from, to, tokens, words) => this.storedRun(storedKind, blockSize, hashes, from, to, tokens, words),
      removed: (hash) => this.removed(removedKind, hash),
      removedWords: (_hash, high, low) => this.removedWords(removedKind, high, low),
      cleared: () => this.cleared(),
    };
  }

  /** Batches written so far (steps that recorded an event). */
  get written(): number {
    return this.batches;
  }

  /** Batches the reader has handed on so far. */
  get handedOn(): number {
    return Atomics.load(this.control, HANDED_ON);
  }

  /** Resolves once the reader has handed on every batch written so far. */
  async caughtUp(): Promise<void> {
    for (;;) {
      const seen = Atomics.load(this.control, HANDED_ON);
      if (seen - this.batches >= 0) return;
      const wait = waitAsync(this.control, HANDED_ON, seen);
      if (wait.async) await wait.value;
    }
  }

  flush(ts: number): void {
    if (!this.recordedInStep) return;
    this.recordedInStep = false;
    this.batches++;
    this.tsValue[0] = ts;
    if (this.queue.length === 0 && this.room(END_WORDS)) {
      const w = this.write;
      const mask = this.mask;
      this.ring[w & mask] = KIND_END;
      this.ring[(w + 1) & mask] = this.tsWords[0];
      this.ring[(w + 2) & mask] = this.tsWords[1];
      this.write = (w + END_WORDS) | 0;
      this.publish();
    } else this.enqueue(Int32Array.of(KIND_END, this.tsWords[0], this.tsWords[1]));
  }

  /** Runs `action` once every record written so far is published (now, when nothing waits for room). */
  after(action: () => void): void {
    if (this.queue.length === 0) {
      this.publish();
      action();
    } else this.queue.push(action);
  }

  private stored(kind: number, blockSize: number, hashes: readonly BlockHash[], parent: BlockHash | null, tokens: readonly number[], words?: HashWords): void {
    const n = hashes.length;
    if (n === 0) return;
    this.recordedInStep = true;
    const m = tokens.length;
    const size = storedHeadWords(n, m, blockSize, parent !== null) + 2 * n + m;
    if (size > this.maxRecordWords) {
      this.storedInParts(kind, blockSize, hashes, parent, tokens);
      return;
    }
    if (this.queue.length > 0 || !this.room(size)) {
      this.enqueue(this.storedRecord(kind, blockSize, hashes, parent, tokens));
      return;
    }
    let w = this.writeStoredHead(kind, n, m, blockSize, parent);
    w = words === undefined ? this.hashWordsInto(this.ring, w, this.mask, hashes, 0, n) : this.writeWords(w, words, 0, n);
    const ring = this.ring;
    const mask = this.mask;
    for (let i = 0; i < m; i++) ring[(w + i) & mask] = tokens[i];
    this.write = (w + m) | 0;
  }

  /** stored() for the run [from, to) of a block table (TierEventSink.storedRun): written straight from the table's hashes and the request's tokens. */
  private storedRun(kind: number, blockSize: number, hashes: readonly BlockHash[], from: number, to: number, tokens: BlockTokenSource, words?: HashWords): void {
    const n = to - from;
    if (n <= 0) return;
    const m = n * blockSize;
    const size = storedHeadWords(n, m, blockSize, from > 0) + 2 * n + m;
    if (size > this.maxRecordWords || this.queue.length > 0 || !this.room(size)) {
      // Split or queued (a full ring, a huge run): the record needs arrays of its own anyway.
      const run = storedRunArrays(hashes, from, to, tokens, blockSize);
      this.stored(kind, blockSize, run.hashes, run.parent, run.tokenIds);
      return;
    }
    this.recordedInStep = true;
    let w: number;
    if (words === undefined) {
      w = this.writeStoredHead(kind, n, m, blockSize, from > 0 ? hashes[from - 1] : null);
      w = this.hashWordsInto(this.ring, w, this.mask, hashes, from, n);
    } else {
      // The tier's words: the parent's pair first, then the run's.
      w = this.writeHead(kind, n, m, blockSize, from > 0, words[0], words[1]);
      w = this.writeWords(w, words, 1, n);
    }
    const ring = this.ring;
    const mask = this.mask;
    const first = from * blockSize;
    const at = w & mask;
    // Copied by the source in one call where the run does not wrap the ring's end.
    if (tokens.copyTokens !== undefined && at + m <= this.capacity) tokens.copyTokens(first, first + m, ring, at);
    else for (let i = 0; i < m; i++) ring[(w + i) & mask] = tokens.tokenAt(first + i);
    this.write = (w + m) | 0;
  }

  /** A stored record's head at the write position (room checked by the caller); returns where its hashes go. */
  private writeStoredHead(kind: number, n: number, m: number, blockSize: number, parent: BlockHash | null): number {
    if (parent === null) return this.writeHead(kind, n, m, blockSize, false, 0, 0);
    eventHashWords(parent, this.hash);
    return this.writeHead(kind, n, m, blockSize, true, this.hash[0], this.hash[1]);
  }

  /** writeStoredHead with the parent's words given (none without `hasParent`). */
  private writeHead(kind: number, n: number, m: number, blockSize: number, hasParent: boolean, parentHigh: number, parentLow: number): number {
    return writeStoredHeadInto(this.ring, this.write, this.mask, kind, n, m, blockSize, hasParent, parentHigh, parentLow);
  }

  /** `n` (high, low) pairs of `words` from pair `pair` on, from ring position `w`; returns the position after them. */
  private writeWords(w: number, words: HashWords, pair: number, n: number): number {
    const ring = this.ring;
    const mask = this.mask;
    const end = 2 * (pair + n);
    for (let i = 2 * pair; i < end; i++) {
      ring[w & mask] = words[i];
      w = (w + 1) | 0;
    }
    return w;
  }

  /** hashes[from, from + n) as (high, low) words into `into` from index `at` (masked by `mask`: -1 for a record array of its own); returns the index after them. */
  private hashWordsInto(into: Int32Array, at: number, mask: number, hashes: readonly BlockHash[], from: number, n: number): number {
    const hash = this.hash;
    let w = at;
    for (let i = from; i < from + n; i++) {
      eventHashWords(hashes[i], hash);
      into[w & mask] = hash[0];
      into[(w + 1) & mask] = hash[1];
      w = (w + 2) | 0;
    }
    return w;
  }

  private storedRecord(kind: number, blockSize: number, hashes: readonly BlockHash[], parent: BlockHash | null, tokens: readonly number[]): Int32Array {
    const n = hashes.length;
    const m = tokens.length;
    const head = storedHeadWords(n, m, blockSize, parent !== null);
    const record = new Int32Array(head + 2 * n + m);
    if (parent !== null) eventHashWords(parent, this.hash);
    writeStoredHeadInto(record, 0, -1, kind, n, m, blockSize, parent !== null, this.hash[0], this.hash[1]);
    this.hashWordsInto(record, head, -1, hashes, 0, n);
    record.set(tokens, head + 2 * n);
    return record;
  }

  /** An event larger than a record: its head, then its hashes and tokens in records of at most maxRecordWords. */
  private storedInParts(kind: number, blockSize: number, hashes: readonly BlockHash[], parent: BlockHash | null, tokens: readonly number[]): void {
    this.put(this.storedRecord(kind, blockSize, [], parent, []));
    const room = this.maxRecordWords - MORE_HEAD;
    let h = 0;
    let t = 0;
    while (h < hashes.length || t < tokens.length) {
      const n = Math.min(hashes.length - h, room >> 1);
      const m = Math.min(tokens.length - t, room - 2 * n);
      const record = new Int32Array(MORE_HEAD + 2 * n + m);
      record[0] = KIND_STORED_MORE;
      record[1] = n;
      record[2] = m;
      this.hashWordsInto(record, MORE_HEAD, -1, hashes, h, n);
      for (let i = 0; i < m; i++) record[MORE_HEAD + 2 * n + i] = tokens[t + i];
      this.put(record);
      h += n;
      t += m;
    }
  }

  private removed(kind: number, hash: BlockHash): void {
    eventHashWords(hash, this.hash);
    this.removedWords(kind, this.hash[0], this.hash[1]);
  }

  private removedWords(kind: number, high: number, low: number): void {
    this.recordedInStep = true;
    if (this.queue.length === 0 && this.room(REMOVED_WORDS)) {
      const w = this.write;
      const mask = this.mask;
      this.ring[w & mask] = kind;
      this.ring[(w + 1) & mask] = high;
      this.ring[(w + 2) & mask] = low;
      this.write = (w + REMOVED_WORDS) | 0;
    } else this.enqueue(Int32Array.of(kind, high, low));
  }

  private cleared(): void {
    this.recordedInStep = true;
    this.put(Int32Array.of(KIND_CLEARED));
  }

  private put(record: Int32Array): void {
    if (this.queue.length === 0 && this.room(record.length)) this.copyIn(record);
    else this.enqueue(record);
  }

  /** Makes what was written visible to the reader; wakes it if it sleeps (it raised SLEEPING, which this clears, so one publish wakes it once). */
  private publish(): void {
    if (!this.storeWrite()) return;
    if (Atomics.load(this.control, SLEEPING) === 1 && Atomics.compareExchange(this.control, SLEEPING, 1, 0) === 1) Atomics.notify(this.control, WRITE);
  }

  protected override moved(): void {
    this.publish();
  }

  protected override enqueue(record: Int32Array): void {
    // The ring is full of records the reader has not been shown: show them, or it can never make room.
    this.publish();
    super.enqueue(record);
  }
}

/** A growable Int32Array. */
class Words {
  data = new Int32Array(256);
  length = 0;

  push(value: number): void {
    if (this.length === this.data.length) this.grow(this.length + 1);
    this.data[this.length++] = value;
  }

  /** Makes room for `more` words; returns where they start. */
  reserve(more: number): number {
    const at = this.length;
    if (at + more > this.data.length) this.grow(at + more);
    this.length = at + more;
    return at;
  }

  private grow(least: number): void {
    let size = this.data.length * 2;
    while (size < least) size *= 2;
    const grown = new Int32Array(size);
    grown.set(this.data.subarray(0, this.length));
    this.data = grown;
  }
}

/** The KV event thread's side: rebuilds each step's batch from the records. */
export class KvEventRingReader extends IntRingReader {
  private readonly events = new Words();
  private readonly hashes = new Words();
  private readonly tokens = new Words();
  private eventCount = 0;
  /** The removal event still open (consecutive removals of one tier join it), as its index in `events`, or -1. */
  private openRemoval = -1;
  /** The stored event a STORED_MORE record continues, or -1. */
  private openStored = -1;
  private readonly tsWords = new Int32Array(2);
  private readonly tsValue = new Float64Array(this.tsWords.buffer);

  /**
   * Reads every published record; hands each batch completed by an END
   * record to `onBatch`, in order (a batch whose END is not published yet
   * is kept for the next drain). Returns the words read.
   */
  drain(onBatch: (batch: KvRecordBatch) => void): number {
    const ring = this.ring;
    const mask = this.mask;
    const end = this.writePosition();
    const start = this.read;
    let r = start;
    while (r !== end) {
      const head = ring[r & mask];
      const kind = head & KIND_MASK;
      switch (kind) {
        case KIND_REMOVED_GPU:
        case KIND_REMOVED_CPU: {
          const open = this.openRemoval;
          if (open < 0 || this.events.data[open + EVENT_KIND] !== kind) this.openRemoval = this.addEvent(kind, 0, 0, 0, 0);
          const e = this.openRemoval;
          const at = this.hashes.reserve(2);
          this.hashes.data[at] = ring[(r + 1) & mask];
          this.hashes.data[at + 1] = ring[(r + 2) & mask];
          this.events.data[e + EVENT_HASHES]++;
          r = (r + REMOVED_WORDS) | 0;
          break;
        }
        case KIND_STORED_GPU:
        case KIND_STORED_CPU: {
          const n = ring[(r + 1) & mask];
          let at = (r + 2) | 0;
          let m = 0;
          if ((head & (WHOLE_BLOCKS | NO_TOKENS)) === 0) {
            m = ring[at & mask];
            at = (at + 1) | 0;
          }
          const blockSize = ring[at & mask];
          at = (at + 1) | 0;
          if ((head & WHOLE_BLOCKS) !== 0) m = n * blockSize;
          let e: number;
          if ((head & HAS_PARENT) !== 0) {
            e = this.addEvent(kind, blockSize, 1, ring[at & mask], ring[(at + 1) & mask]);
            at = (at + 2) | 0;
          } else e = this.addEvent(kind, blockSize, 0, 0, 0);
          this.openStored = e;
          this.openRemoval = -1;
          r = this.readHashesAndTokens(e, n, m, at);
          break;
        }
        case KIND_STORED_MORE: {
          if (this.openStored < 0) throw new Error(`KV event ring: a continuation with no stored event before it at word ${r}`);
          r = this.readHashesAndTokens(this.openStored, ring[(r + 1) & mask], ring[(r + 2) & mask], (r + MORE_HEAD) | 0);
          break;
        }
        case KIND_CLEARED:
          this.addEvent(kind, 0, 0, 0, 0);
          this.openRemoval = -1;
          this.openStored = -1;
          r = (r + 1) | 0;
          break;
        case KIND_END:
          this.tsWords[0] = ring[(r + 1) & mask];
          this.tsWords[1] = ring[(r + 2) & mask];
          r = (r + END_WORDS) | 0;
          onBatch({ ts: this.tsValue[0], eventCount: this.eventCount, events: this.events.data, hashes: this.hashes.data, tokens: this.tokens.data });
          this.events.length = 0;
          this.hashes.length = 0;
          this.tokens.length = 0;
          this.eventCount = 0;
          this.openRemoval = -1;
          this.openStored = -1;
          Atomics.add(this.control, HANDED_ON, 1);
          Atomics.notify(this.control, HANDED_ON);
          break;
        default:
          throw new Error(`KV event ring: unknown record kind ${kind} at word ${r}`);
      }
    }
    if (r === start) return 0;
    this.advance(r);
    return (r - start) | 0;
  }

  /** true when the writer has published past what was read. */
  get pending(): boolean {
    return this.writePosition() !== this.read;
  }

  /**
   * Resolves once the writer has published past what was read (at once if
   * it has). Until then the reader sleeps: it raises SLEEPING, so the next
   * publish wakes it.
   */
  async published(): Promise<void> {
    while (!this.pending) {
      Atomics.store(this.control, SLEEPING, 1);
      // A publish before the flag was seen does not wake: look once more (flag and position are both sequentially consistent, so one side sees the other).
      if (this.pending) break;
      const wait = waitAsync(this.control, WRITE, this.read);
      if (wait.async) await wait.value;
    }
    Atomics.store(this.control, SLEEPING, 0);
  }

  private addEvent(kind: number, blockSize: number, hasParent: number, parentHigh: number, parentLow: number): number {
    const e = this.events.reserve(EVENT_FIELDS);
    const d = this.events.data;
    d[e + EVENT_KIND] = kind;
    d[e + EVENT_HASH_AT] = this.hashes.length;
    d[e + EVENT_HASHES] = 0;
    d[e + EVENT_TOKEN_AT] = this.tokens.length;
    d[e + EVENT_TOKENS] = 0;
    d[e + EVENT_BLOCK_SIZE] = blockSize;
    d[e + EVENT_HAS_PARENT] = hasParent;
    d[e + EVENT_PARENT_HIGH] = parentHigh;
    d[e + EVENT_PARENT_LOW] = parentLow;
    this.eventCount++;
    return e;
  }

  /** Appends the n hashes and m tokens of a record whose words start at `from`; returns the record's end. */
  private readHashesAndTokens(e: number, n: number, m: number, from: number): number {
    const ring = this.ring;
    const mask = this.mask;
    const h = this.hashes.reserve(2 * n);
    const hashes = this.hashes.data;
    for (let i = 0; i < 2 * n; i++) hashes[h + i] = ring[(from + i) & mask];
    const t = this.tokens.reserve(m);
    const tokens = this.tokens.data;
    const at = (from + 2 * n) | 0;
    for (let i = 0; i < m; i++) tokens[t + i] = ring[(at + i) & mask];
    // Nothing else was appended since the event's own hashes and tokens: the new ones continue them.
    this.events.data[e + EVENT_HASHES] += n;
    this.events.data[e + EVENT_TOKENS] += m;
    return (at + m) | 0;
  }
}
