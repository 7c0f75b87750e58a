import { Engine, type EngineOptions } from '../runtime/engine.js';
import type { EngineConfigInput, FinishedRequest, RequestSpec, StepReport } from '../runtime/engine-types.js';
import { QueueFullError, RequestAbortedError, ServingClosedError } from './errors.js';
import { RequestStream } from './request-stream.js';
import type { RequestEndSink, StepTokenSink } from './step-token-sink.js';

/**
 * The engine as a long-running service: one loop steps while work is pending
 * and sleeps on a promise otherwise (a new request wakes it), so an idle
 * engine costs no CPU. Callers get a promise of the finished request
 * (`generate`) or an async iterator of its tokens (`stream`), abort through
 * an AbortSignal, and are refused with QueueFullError when too many requests
 * wait for their first token. The wrapped Engine's step()/run() API stays
 * for replays; while a ServingEngine drives an engine, nothing else should.
 */

export interface ServingOptions {
  /**
   * Most requests that may wait for their first token (queued, or running
   * their prefill) before new ones are refused with QueueFullError. Default
   * 1024.
   */
  readonly maxWaiting?: number;
  /** Called after every step, once its tokens were delivered (e.g. to verify finished requests or count work). */
  readonly onStep?: (report: StepReport) => void;
}

export interface SubmitOptions {
  /** Aborting it aborts the request: its blocks are freed and it ends with RequestAbortedError. */
  readonly signal?: AbortSignal;
}

/**
 * Requests that come from somewhere the serving loop reads itself (the HTTP
 * front-end thread's arrival ring): polled at each step boundary, so
 * arrivals cost no task of their own while the loop steps.
 */
export interface RequestSource {
  /** Submits (submit() or stream()) what arrived since the last poll. */
  poll(): void;
  /**
   * The loop is about to sleep: the source must see that a later arrival
   * wakes it (by submitting it), then poll once more, as one may have come
   * since the last poll.
   */
  sleeping(): void;
  /** The loop woke: it polls again before its next step. */
  awake(): void;
}

export interface DrainOutcome {
  /** Requests that finished within the deadline, and those aborted when it passed. */
  readonly finished: number;
  readonly aborted: number;
}

export const DEFAULT_MAX_WAITING = 1024;

type AbortListener = { readonly signal: AbortSignal; readonly listener: () => void };

/**
 * A request in flight. It is the request's owner in the engine
 * (Engine.addRequest), so each step's updates hand it back: delivery looks
 * nothing up by id.
 */
class Ticket {
  // Delivery reads the first five for every token of every step: declared (and set) first, so they lie together at the object's start.
  started = false;
  /** It ended here; the engine may still name it in the step that ended it. */
  ended = false;
  readonly serving: ServingEngine;
  /** submit()'s step sink and key, which take the tokens in place of a stream; null: the stream does. */
  stepSink: StepTokenSink | null;
  readonly sinkKey: number;
  /** submit()'s end sink, told of the end by sinkKey in place of a stream; null: the stream is. */
  readonly endSink: RequestEndSink | null;
  /** The engine's id of the request, set as soon as the engine has taken it. */
  id = '';
  /** The stream its caller reads (stream(), generate()); null for a request submitted with an end sink (submit()). */
  stream: RequestStream | null = null;
  /** The abort to apply between two steps, or null. */
  pendingAbort: RequestAbortedError | null = null;
  abortListener: AbortListener | null = null;

  constructor(serving: ServingEngine, stepSink: StepTokenSink | null, sinkKey: number, endSink: RequestEndSink | null) {
    this.serving = serving;
    this.stepSink = stepSink;
    this.sinkKey = sinkKey;
    this.endSink = endSink;
  }

  /** The tokens the caller was given so far, as an abort error carries them (none where a step sink took them). */
  outputTokens(): number[] {
    return this.stream === null ? [] : this.stream.outputTokens.slice();
  }
}

/**
 * Step sinks with how many requests in flight each has. A server has one or
 * two (the front-end thread's token ring), so a request's arrival and end
 * scan a short list rather than look up and store in a Map.
 */
class StepSinkCounts {
  private readonly sinks: StepTokenSink[] = [];
  private readonly counts: number[] = [];

  add(sink: StepTokenSink): void {
    const at = this.sinks.indexOf(sink);
    if (at >= 0) this.counts[at]++;
    else {
      this.sinks.push(sink);
      this.counts.push(1);
    }
  }

  /** One request of `sink` ended; the sink is dropped with its last. */
  remove(sink: StepTokenSink): void {
    const at = this.sinks.indexOf(sink);
    if (at < 0) return;
    if (--this.counts[at] > 0) return;
    this.sinks.splice(at, 1);
    this.counts.splice(at, 1);
  }

  /** Appends every sink with a request in flight to `out`. */
  copyInto(out: StepTokenSink[]): void {
    for (let i = 0; i < this.sinks.length; i++) out.push(this.sinks[i]);
  }
}

export class ServingEngine {
  private readonly tickets = new Map<string, Ticket>();
  private readonly aborts: Ticket[] = [];
  /** The step sinks of the requests in flight, with how many requests each has. */
  private readonly stepSinks = new StepSinkCounts();
  /** The step sinks opened for the delivery in progress (kept to close each once, whatever ends meanwhile). */
  private readonly openSinks: StepTokenSink[] = [];
  private readonly sources: RequestSource[] = [];
  /** Called once no request is in flight (drain waits so). */
  private readonly emptyWaiters: (() => void)[] = [];
  /** From drain() on: how the requests that ended did (an abort, or anything else), as drain reports them. */
  private drainTally: { finished: number; aborted: number } | null = null;
  private readonly maxWaiting: number;
  private readonly onStep: ((report: StepReport) => void) | null;
  private waitingCount = 0;
  private wake: (() => void) | null = null;
  private draining = false;
  private closed = false;
  /** Why the engine stopped (a rank died and could not be recovered), or null. */
  private failure: unknown = null;
  private readonly loopDone: Promise<void>;
  private closing: Promise<void> | null = null;
  private loopEnded = false;
  private reportFailure!: (error: unknown) => void;
  /** Settles with the error that stopped the engine (a rank lost beyond recovery); pending while it serves. */
  readonly failed: Promise<unknown> = new Promise((resolve) => {
    this.reportFailure = resolve;
  });

  /**
   * Serves `engine`. With `ownsEngine` (as `create` sets), close() shuts the
   * engine down too.
   */
  constructor(
    readonly engine: Engine,
    options: ServingOptions = {},
    private readonly ownsEngine = false,
  ) {
    const maxWaiting = options.maxWaiting ?? DEFAULT_MAX_WAITING;
    if (!Number.isSafeInteger(maxWaiting) || maxWaiting < 1) throw new RangeError(`maxWaiting: expected an integer >= 1, got ${String(maxWaiting)}`);
    this.maxWaiting = maxWaiting;
    this.onStep = options.onStep ?? null;
    this.loopDone = this.loop();
  }

  /** Starts an engine and serves it; close() (or `await using`) shuts both down. */
  static async create(config: EngineConfigInput = {}, engineOptions: EngineOptions = {}, options: ServingOptions = {}): Promise<ServingEngine> {
    return new ServingEngine(await Engine.create(config, engineOptions), options, true);
  }

  /** Requests accepted and not yet ended. */
  get inFlight(): number {
    return this.tickets.size;
  }

  /** Requests accepted that have no output token yet (what maxWaiting bounds). */
  get waiting(): number {
    return this.waitingCount;
  }

  /** true while the loop waits for work, and once it has ended: a RequestSource's arrivals are then not polled unless it submits them itself. */
  get sleeping(): boolean {
    return this.wake !== null || this.loopEnded;
  }

  /** true from drain() or close() on: new requests are refused. */
  get accepting(): boolean {
    return !this.draining && !this.closed && this.failure === null;
  }

  /**
   * Queues a request; its tokens arrive on the returned iterator as the
   * engine generates them, and `result` holds the finished request. Throws
   * at once (nothing queued) for a request the engine refuses
   * (RequestError), a full queue (QueueFullError), a draining or closed
   * server (ServingClosedError) or a stopped engine (EngineStoppedError).
   * Breaking out of the iteration aborts the request.
   */
  stream(spec: RequestSpec, options: SubmitOptions = {}): RequestStream {
    this.assertAccepting();
    const signal = options.signal;
    if (signal?.aborted) throw abortedBeforeStart(signal);
    if (this.waitingCount >= this.maxWaiting) throw new QueueFullError(this.maxWaiting);
    const ticket = this.add(spec, new Ticket(this, null, 0, null));
    const id = ticket.id;
    const stream = new RequestStream(id, (s) => this.requestAbort(s.id, new RequestAbortedError(`request ${s.id} was abandoned by its reader`, s.outputTokens.slice())));
    ticket.stream = stream;
    if (signal !== undefined) {
      const listener = (): void => this.requestAbort(id, abortedBy(signal, id, stream.outputTokens));
      signal.addEventListener('abort', listener, { once: true });
      ticket.abortListener = { signal, listener };
    }
    return stream;
  }

  /**
   * Queues a request for a consumer of many (the HTTP front-end thread's
   * intake): its tokens go to `tokens` and its end to `ends`, each by
   * `key`, with no stream, promise or closure per request. Returns the
   * engine's id of the request (abort(id) aborts it). Throws as stream()
   * does, with nothing queued.
   */
  submit(spec: RequestSpec, key: number, tokens: StepTokenSink, ends: RequestEndSink): string {
    this.assertAccepting();
    if (this.waitingCount >= this.maxWaiting) throw new QueueFullError(this.maxWaiting);
    if (typeof key !== 'number' || !Number.isFinite(key)) throw new RangeError(`key: expected a number, got ${String(key)}`);
    return this.add(spec, new Ticket(this, tokens, key, ends)).id;
  }

  /** Hands the request to the engine (which throws for one it refuses, nothing kept), then keeps its ticket. */
  private add(spec: RequestSpec, ticket: Ticket): Ticket {
    // Added now, between or during a step: the scheduler queues it for the next schedule().
    ticket.id = this.engine.addRequest(spec, ticket);
    const sink = ticket.stepSink;
    if (sink !== null) this.stepSinks.add(sink);
    this.tickets.set(ticket.id, ticket);
    this.waitingCount++;
    this.wake?.();
    return ticket;
  }

  /**
   * Adds a source of requests the loop polls at each step boundary; returns
   * a function that removes it. While the loop sleeps it is the source's
   * part to wake it (its poll submits, which wakes the loop).
   */
  addSource(source: RequestSource): () => void {
    this.sources.push(source);
    // A sleeping loop only learns of the source's arrivals through it.
    if (this.sleeping) source.sleeping();
    return () => {
      const at = this.sources.indexOf(source);
      if (at >= 0) this.sources.splice(at, 1);
    };
  }

  /**
   * Aborts the request `id` (the stream's id) as its signal would, saying
   * `why` in its RequestAbortedError; false when no such request is in
   * flight. For a caller that keeps requests by id rather than a signal
   * each (the HTTP front-end thread's host).
   */
  abort(id: string, why: string): boolean {
    const ticket = this.tickets.get(id);
    if (ticket === undefined) return false;
    this.requestAbort(id, new RequestAbortedError(`request ${id} was aborted: ${why}`, ticket.outputTokens()));
    return true;
  }

  /** Queues a request and resolves with it finished (any finish reason but an abort, which rejects with RequestAbortedError). */
  async generate(spec: RequestSpec, options: SubmitOptions = {}): Promise<FinishedRequest> {
    return this.stream(spec, options).result;
  }

  /**
   * Stops taking requests (they get ServingClosedError) and waits for those
   * in flight; any still running after `deadlineMs` are aborted. The engine
   * keeps running until close().
   */
  async drain(deadlineMs: number): Promise<DrainOutcome> {
    this.draining = true;
    // Nothing is accepted from here on: the requests that end from now are those in flight now.
    const tally = (this.drainTally ??= { finished: 0, aborted: 0 });
    const before = { ...tally };
    const settled = this.untilEmpty();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, deadlineMs);
    });
    await Promise.race([settled, deadline]);
    clearTimeout(timer);
    this.abortAll(`the server shut down before it finished (drain deadline ${deadlineMs} ms)`);
    await settled;
    return { finished: tally.finished - before.finished, aborted: tally.aborted - before.aborted };
  }

  /** Resolves once no request is in flight. */
  private untilEmpty(): Promise<void> {
    if (this.tickets.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.emptyWaiters.push(resolve));
  }

  /** Aborts every request in flight, stops the loop and (when it owns it) shuts the engine down. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private async closeOnce(): Promise<void> {
    this.draining = true;
    this.abortAll('the serving engine closed');
    this.closed = true;
    this.wake?.();
    await this.loopDone;
    if (this.ownsEngine) await this.engine.shutdown();
  }

  private assertAccepting(): void {
    if (this.failure !== null) throw this.failure;
    if (this.closed) throw new ServingClosedError('closed');
    if (this.draining) throw new ServingClosedError('draining');
  }

  /** Marks every request in flight for abort, saying `why` in each one's error. */
  private abortAll(why: string): void {
    for (const ticket of [...this.tickets.values()]) {
      this.requestAbort(ticket.id, new RequestAbortedError(`request ${ticket.id} was aborted: ${why}`, ticket.outputTokens()));
    }
  }

  /** Marks a request for abort; the loop applies it between two steps (a step in flight still uses its blocks). */
  private requestAbort(id: string, error: RequestAbortedError): void {
    const ticket = this.tickets.get(id);
    if (ticket === undefined || ticket.pendingAbort !== null) return;
    ticket.pendingAbort = error;
    this.aborts.push(ticket);
    this.wake?.();
  }

  private async loop(): Promise<void> {
    for (;;) {
      this.applyAborts();
      for (const source of this.sources) source.poll();
      if (this.closed && this.tickets.size === 0 && !this.engine.hasPendingWork()) {
        this.stopPolling();
        return;
      }
      if (!this.engine.hasPendingWork()) {
        if (this.closed) {
          this.stopPolling();
          return;
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          // After wake is set: a source's arrival from here on wakes the loop.
          for (const source of this.sources) source.sleeping();
        });
        this.wake = null;
        for (const source of this.sources) source.awake();
        continue;
      }
      let report: StepReport;
      try {
        report = await this.engine.step();
      } catch (error) {
        this.stopAll(error);
        this.stopPolling();
        return;
      }
      this.deliver(report);
      this.onStep?.(report);
    }
  }

  /** The loop ended: its sources submit on their own from now on (and are refused). */
  private stopPolling(): void {
    this.loopEnded = true;
    for (const source of this.sources) source.sleeping();
  }

  private applyAborts(): void {
    for (const ticket of this.aborts.splice(0)) {
      const id = ticket.id;
      if (this.tickets.get(id) !== ticket || ticket.pendingAbort === null) continue;
      // false: it finished in the step that just ended, and was delivered as finished.
      if (!this.engine.abort(id)) continue;
      this.fail(ticket, ticket.pendingAbort);
    }
  }

  private deliver(report: StepReport): void {
    const open = this.openSinks;
    this.stepSinks.copyInto(open);
    const updates = report.tokenUpdates;
    for (const sink of open) this.callStepSink(sink, () => sink.beginStep(updates.length));
    for (let i = 0; i < updates.length; i++) {
      const update = updates[i];
      const tokens = update.newTokenIds;
      // One token as a number (a decode step's update): its array is not read.
      const token = update.token;
      const ticket = update.owner;
      // The owner is this server's ticket for every request it submitted; a request added to the engine otherwise is not its to deliver.
      if ((token === undefined && tokens.length === 0) || !(ticket instanceof Ticket) || ticket.serving !== this || ticket.ended) continue;
      if (!ticket.started) {
        ticket.started = true;
        this.waitingCount--;
      }
      if (ticket.stepSink !== null) this.toStepSink(ticket, update.reqId, tokens, token);
      else ticket.stream?.push(tokens);
    }
    // Closed before any request ends below: a finish is handed on after the step's tokens.
    for (const sink of open) this.callStepSink(sink, () => sink.endStep());
    open.length = 0;
    for (const finished of report.finished) {
      const ticket = this.tickets.get(finished.id);
      if (ticket === undefined) continue;
      if (finished.finishReason === 'aborted') {
        this.fail(ticket, ticket.pendingAbort ?? new RequestAbortedError(`request ${finished.id} was aborted`, finished.outputTokens, finished));
      } else {
        this.finish(ticket, finished);
      }
    }
  }

  /** `token`: the one new token as a number, where the engine's update gives it (RequestTokens.token). */
  private toStepSink(ticket: Ticket, id: string, tokens: readonly number[], token: number | undefined): void {
    const sink = ticket.stepSink!;
    try {
      if (token !== undefined && sink.token !== undefined) sink.token(ticket.sinkKey, token);
      else sink.tokens(ticket.sinkKey, tokens);
    } catch (error) {
      this.detachStepSink(ticket);
      this.requestAbort(id, sinkFailed(id, error));
    }
  }

  /** Opens or closes a step sink; one that throws loses all its requests, each aborted. */
  private callStepSink(sink: StepTokenSink, call: () => void): void {
    try {
      call();
    } catch (error) {
      for (const ticket of [...this.tickets.values()]) {
        if (ticket.stepSink !== sink) continue;
        this.detachStepSink(ticket);
        this.requestAbort(ticket.id, sinkFailed(ticket.id, error));
      }
    }
  }

  private detachStepSink(ticket: Ticket): void {
    const sink = ticket.stepSink;
    if (sink === null) return;
    ticket.stepSink = null;
    this.stepSinks.remove(sink);
  }

  /** The engine stopped: requests it ended are finished with their error; any other fails with the engine's error. */
  private stopAll(error: unknown): void {
    this.failure = error;
    this.reportFailure(error);
    const ended = (error as { finished?: readonly FinishedRequest[] }).finished ?? [];
    for (const finished of ended) {
      const ticket = this.tickets.get(finished.id);
      if (ticket === undefined) continue;
      this.finish(ticket, finished);
    }
    for (const ticket of [...this.tickets.values()]) this.fail(ticket, error);
  }

  /** Ends the request and settles its stream, or tells its end sink, with the finished request. */
  private finish(ticket: Ticket, finished: FinishedRequest): void {
    this.end(ticket);
    if (this.drainTally !== null) this.drainTally.finished++;
    const sink = ticket.endSink;
    if (sink === null) ticket.stream?.finish(finished);
    else {
      try {
        sink.finished(ticket.sinkKey, finished);
      } catch (error) {
        rethrowLater(error);
      }
    }
    this.emptied();
  }

  /** Ends the request and fails its stream, or tells its end sink, with `error`. */
  private fail(ticket: Ticket, error: unknown): void {
    this.end(ticket);
    if (this.drainTally !== null) {
      if (error instanceof RequestAbortedError) this.drainTally.aborted++;
      else this.drainTally.finished++;
    }
    const sink = ticket.endSink;
    if (sink === null) ticket.stream?.fail(error);
    else {
      try {
        sink.failed(ticket.sinkKey, error);
      } catch (thrown) {
        rethrowLater(thrown);
      }
    }
    this.emptied();
  }

  private emptied(): void {
    if (this.tickets.size > 0 || this.emptyWaiters.length === 0) return;
    for (const resolve of this.emptyWaiters.splice(0)) resolve();
  }

  private end(ticket: Ticket): void {
    ticket.ended = true;
    this.tickets.delete(ticket.id);
    if (!ticket.started) this.waitingCount--;
    ticket.started = true;
    this.detachStepSink(ticket);
    if (ticket.abortListener !== null) ticket.abortListener.signal.removeEventListener('abort', ticket.abortListener.listener);
  }
}

/** What an end sink threw: it surfaces as an uncaught error, as a throwing handler of a stream's result would, and the serving loop goes on. */
function rethrowLater(error: unknown): void {
  queueMicrotask(() => {
    throw error;
  });
}

function sinkFailed(id: string, error: unknown): RequestAbortedError {
  return new RequestAbortedError(`request ${id} was aborted: its token sink failed: ${(error as Error).message}`, [], null, { cause: error });
}

function abortedBeforeStart(signal: AbortSignal): RequestAbortedError {
  return new RequestAbortedError(`request was aborted before it was queued${reasonText(signal)}`, [], null, { cause: signal.reason });
}

function abortedBy(signal: AbortSignal, id: string, tokens: readonly number[]): RequestAbortedError {
  return new RequestAbortedError(`request ${id} was aborted by its caller${reasonText(signal)}`, tokens.slice(), null, { cause: signal.reason });
}

function reasonText(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  if (reason instanceof Error && reason.name !== 'AbortError') return `: ${reason.message}`;
  return '';
}
