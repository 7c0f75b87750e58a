/**
 * The mechanics of the rings between the engine's thread and the threads
 * beside it (the HTTP front end's token and arrival rings, the KV event
 * ring): a ring of Int32 words in a SharedArrayBuffer behind a few control
 * words, one writer and one reader.
 *
 * The writer never drops or overwrites a record: one that does not fit goes
 * to a queue on the writer's side, as does everything after it; the writer
 * raises WAITING, and the reader, once it has made room, clears it and
 * calls onRoom (which should have the writer's resume() called). Each ring
 * keeps its own record formats, its publishing and the use of its own words.
 */

/** Control words before the ring: the write and read positions (word counts, wrapping at 2^32), the writer's waiting flag, and two words of the ring's own. */
export const WRITE = 0;
export const READ = 1;
export const WAITING = 2;
export const OWN_WORD = 3;
export const SECOND_OWN_WORD = 4;
const CONTROL_WORDS = 5;

const MAX_RING_WORDS = 2 ** 28;

/** A buffer for a ring of `ringWords` words (a power of two in [minWords, 2^28]) and its control words. */
export function createIntRingBuffer(ringWords: number, minWords: number): SharedArrayBuffer {
  if (!Number.isSafeInteger(ringWords) || ringWords < minWords || nextPowerOfTwo(ringWords) !== ringWords || ringWords > MAX_RING_WORDS) {
    throw new RangeError(`ringWords: expected a power of two in [${minWords}, 2^28], got ${String(ringWords)}`);
  }
  return new SharedArrayBuffer((CONTROL_WORDS + ringWords) * Int32Array.BYTES_PER_ELEMENT);
}

export function nextPowerOfTwo(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/** Atomics.waitAsync (Node 16 and later), which the TypeScript library in use does not declare yet. */
type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
) => { readonly async: false; readonly value: 'not-equal' | 'timed-out' } | { readonly async: true; readonly value: Promise<'ok' | 'timed-out'> };
export const waitAsync: WaitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** A record that waits for room, or an action to run once everything queued before it is in the ring. */
export type Queued = Int32Array | (() => void);

/** Either side's views of the buffer: the control words, and the ring with its index mask. */
abstract class IntRingSide {
  protected readonly control: Int32Array;
  protected readonly ring: Int32Array;
  protected readonly mask: number;
  /**
   * The ring's length in words, kept as a number: a typed array's length is
   * read through its buffer, a memory access of its own that is a cache miss
   * on a thread that has not touched the ring for a while (the serving loop
   * between steps), where room checks are made once per record.
   */
  protected readonly capacity: number;

  constructor(buffer: SharedArrayBuffer) {
    this.control = new Int32Array(buffer, 0, CONTROL_WORDS);
    this.ring = new Int32Array(buffer, CONTROL_WORDS * Int32Array.BYTES_PER_ELEMENT);
    this.capacity = this.ring.length;
    this.mask = this.capacity - 1;
  }
}

/** The writer's side: positions, room, and the queue of what did not fit. */
export abstract class IntRingWriter extends IntRingSide {
  protected write = 0;
  /** The reader's position as last read: free space is at least capacity - (write - read). */
  protected read = 0;
  protected readonly queue: Queued[] = [];

  /** Records waiting on the writer's side for room in the ring. */
  get queued(): number {
    return this.queue.length;
  }

  /**
   * Called after queued records were moved in and before a queued action
   * runs: the token ring publishes there; the arrival ring publishes once
   * per turn of its own.
   */
  protected abstract moved(): void;

  /** The reader made room: moves queued records (and runs queued actions) in order until the queue is empty or the ring full. */
  resume(): void {
    for (;;) {
      const queue = this.queue;
      while (queue.length > 0) {
        const next = queue[0];
        if (typeof next === 'function') {
          queue.shift();
          this.moved();
          next();
          continue;
        }
        if (!this.room(next.length)) break;
        queue.shift();
        this.copyIn(next);
      }
      this.moved();
      if (queue.length === 0) return;
      // Still blocked: ask to be told of room, then look once more, as the reader may have made it before seeing the flag.
      Atomics.store(this.control, WAITING, 1);
      const head = queue[0] as Int32Array;
      if (!this.room(head.length)) return;
      Atomics.store(this.control, WAITING, 0);
    }
  }

  /** Queues `record` (and, from then on, everything after it) until the reader makes room. */
  protected enqueue(record: Int32Array): void {
    if (this.queue.length === 0) Atomics.store(this.control, WAITING, 1);
    this.queue.push(record);
    // The reader may have made room between the check and the flag.
    if (this.queue.length === 1 && this.room(record.length)) {
      Atomics.store(this.control, WAITING, 0);
      this.resume();
    }
  }

  /** true when `words` more fit; reads the reader's position again only when the last one seen leaves too little. */
  protected room(words: number): boolean {
    const capacity = this.capacity;
    if (capacity - ((this.write - this.read) | 0) >= words) return true;
    this.read = Atomics.load(this.control, READ);
    return capacity - ((this.write - this.read) | 0) >= words;
  }

  /** Writes `record` at the write position (its room checked by the caller). */
  protected copyIn(record: Int32Array): void {
    const ring = this.ring;
    const mask = this.mask;
    const w = this.write;
    for (let i = 0; i < record.length; i++) ring[(w + i) & mask] = record[i];
    this.write = (w + record.length) | 0;
  }

  /** Stores the write position for the reader; false when it had nothing new. */
  protected storeWrite(): boolean {
    if (Atomics.load(this.control, WRITE) === this.write) return false;
    Atomics.store(this.control, WRITE, this.write);
    return true;
  }
}

/** The reader's side: its position, and telling a waiting writer of room. */
export abstract class IntRingReader extends IntRingSide {
  protected read = 0;

  constructor(
    buffer: SharedArrayBuffer,
    /** Called when the writer waits for room and a read made some: it should have the writer's resume() called. */
    private readonly onRoom: () => void,
  ) {
    super(buffer);
  }

  /** The writer's published position. */
  protected writePosition(): number {
    return Atomics.load(this.control, WRITE);
  }

  /** Everything before `r` was read: gives its room back, and tells a waiting writer. */
  protected advance(r: number): void {
    this.read = r;
    Atomics.store(this.control, READ, r);
    if (Atomics.load(this.control, WAITING) === 1 && Atomics.compareExchange(this.control, WAITING, 1, 0) === 1) this.onRoom();
  }
}
