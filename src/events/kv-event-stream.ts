import { ERROR_CODES } from '../core/error-codes.js';
import { KvtierError } from '../core/errors.js';
import type { KvEventBatch } from './kv-cache-events.js';
import type { KvEventListener } from './kv-event-recorder.js';

/** Where a stream takes its batches from (an engine, or a recorder in tests). */
export interface KvEventSource {
  addKvEventListener(listener: KvEventListener): () => void;
}

export interface KvEventStreamOptions {
  /** Batches kept for a reader that has fallen behind; one more ends the stream with KvEventOverflowError (default 10000, vLLM's replay buffer). */
  readonly maxBuffered?: number;
}

/** A KV event stream's reader fell so far behind that batches would have been lost. */
export class KvEventOverflowError extends KvtierError {
  constructor(maxBuffered: number) {
    super(ERROR_CODES.kvEventsOverflow, `KV event stream: the reader fell ${maxBuffered} batches behind; the stream ended rather than drop events`);
  }
}

const DEFAULT_MAX_BUFFERED = 10_000;

/**
 * The engine's KV event batches as an async iterator, one batch per step
 * that changed a tier. Batches are kept until read, up to `maxBuffered`:
 * a reader that lags further gets KvEventOverflowError instead of a silent
 * gap (a router rebuilding a tier's contents needs every event).
 * `close()` (or leaving a for-await loop) stops listening.
 */
export class KvEventStream implements AsyncIterableIterator<KvEventBatch> {
  private readonly buffered: KvEventBatch[] = [];
  private waiter: { resolve: (result: IteratorResult<KvEventBatch>) => void; reject: (error: Error) => void } | null = null;
  private failure: Error | null = null;
  private closed = false;
  private readonly unsubscribe: () => void;
  private readonly maxBuffered: number;

  constructor(source: KvEventSource, options: KvEventStreamOptions = {}) {
    const maxBuffered = options.maxBuffered ?? DEFAULT_MAX_BUFFERED;
    if (!Number.isSafeInteger(maxBuffered) || maxBuffered < 1) {
      throw new RangeError(`maxBuffered must be an integer >= 1, got ${String(maxBuffered)}`);
    }
    this.maxBuffered = maxBuffered;
    this.unsubscribe = source.addKvEventListener((batch) => this.push(batch));
  }

  next(): Promise<IteratorResult<KvEventBatch>> {
    const batch = this.buffered.shift();
    if (batch !== undefined) return Promise.resolve({ value: batch, done: false });
    if (this.failure !== null) return Promise.reject(this.failure);
    if (this.closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<KvEventBatch>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Stops listening; batches already buffered can still be read. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    this.wake();
  }

  /** Batches received and not read yet. */
  get bufferedBatches(): number {
    return this.buffered.length;
  }

  private push(batch: KvEventBatch): void {
    if (this.closed) return;
    if (this.waiter !== null) {
      const waiter = this.waiter;
      this.waiter = null;
      waiter.resolve({ value: batch, done: false });
      return;
    }
    if (this.buffered.length >= this.maxBuffered) {
      this.failure = new KvEventOverflowError(this.maxBuffered);
      this.buffered.length = 0;
      this.close();
      return;
    }
    this.buffered.push(batch);
  }

  private wake(): void {
    const waiter = this.waiter;
    if (waiter === null) return;
    this.waiter = null;
    if (this.failure !== null) waiter.reject(this.failure);
    else waiter.resolve({ value: undefined, done: true });
  }
}
