import type { FinishedRequest } from '../runtime/engine-types.js';

/**
 * A synchronous receiver of a request's tokens: called inside the serving
 * loop's delivery, once per step that gave the request tokens, with no
 * promise or microtask per token (what an HTTP front end writing hundreds
 * of streams per step wants). The array is the step's: copy what is kept.
 */
export interface TokenSink {
  onTokens(tokens: readonly number[]): void;
}

/**
 * One request's tokens as an async iterator, fed by the serving loop. Tokens
 * are buffered until read, so a slow reader never holds the engine up (a
 * request's output is bounded by its maxTokens). `result` settles with the
 * finished request, or rejects with the reason it ended early; it is marked
 * handled, so a caller that only iterates never sees an unhandled rejection.
 * `Finished` is what `result` holds: the engine's FinishedRequest, or on an
 * HTTP front-end thread what its responses need of one (CompletionOutcome).
 */
export class RequestStream<Finished = FinishedRequest> implements AsyncIterableIterator<number> {
  /** The engine's id of the request. */
  readonly id: string;
  readonly result: Promise<Finished>;
  private readonly buffer: number[] = [];
  private readIndex = 0;
  private waiter: { resolve: (r: IteratorResult<number>) => void; reject: (e: unknown) => void } | null = null;
  private ended = false;
  private error: unknown = null;
  private settle!: { resolve: (f: Finished) => void; reject: (e: unknown) => void };
  private sink: TokenSink | null = null;

  constructor(
    id: string,
    /** Called when the reader stops early (break out of for-await, return()): the request is aborted. */
    private readonly onReturn: (stream: RequestStream<Finished>) => void,
  ) {
    this.id = id;
    this.result = new Promise<Finished>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.result.catch(() => {});
  }

  /** Tokens generated so far (read or not). */
  get outputTokens(): readonly number[] {
    return this.buffer;
  }

  /** true once the request finished or failed. */
  get done(): boolean {
    return this.ended;
  }

  /**
   * Sends the tokens generated so far, then every later step's, to `sink`
   * as they are delivered (the iterator still works beside it). A sink
   * that throws is detached and the request aborted, as a reader that
   * stops early: the serving loop goes on for the others.
   */
  attach(sink: TokenSink): void {
    if (this.sink !== null) throw new Error(`request ${this.id} has a token sink already`);
    this.sink = sink;
    if (this.buffer.length > 0) this.toSink(this.buffer.slice());
  }

  push(tokens: readonly number[]): void {
    if (this.ended) return;
    for (const token of tokens) this.buffer.push(token);
    if (this.sink !== null) this.toSink(tokens);
    this.wakeReader();
  }

  finish(finished: Finished): void {
    if (this.ended) return;
    this.ended = true;
    this.settle.resolve(finished);
    this.wakeReader();
  }

  fail(error: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error;
    this.settle.reject(error);
    this.wakeReader();
  }

  next(): Promise<IteratorResult<number>> {
    if (this.readIndex < this.buffer.length) return Promise.resolve({ value: this.buffer[this.readIndex++], done: false });
    if (this.ended) return this.error === null ? Promise.resolve({ value: undefined, done: true }) : Promise.reject(this.error);
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<number>> {
    if (!this.ended) this.onReturn(this);
    this.readIndex = this.buffer.length;
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<number> {
    return this;
  }

  private toSink(tokens: readonly number[]): void {
    try {
      this.sink!.onTokens(tokens);
    } catch {
      this.sink = null;
      if (!this.ended) this.onReturn(this);
    }
  }

  private wakeReader(): void {
    const waiter = this.waiter;
    if (waiter === null) return;
    this.waiter = null;
    this.next().then(waiter.resolve, waiter.reject);
  }
}
