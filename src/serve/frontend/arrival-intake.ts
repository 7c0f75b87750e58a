import type { FinishedRequest } from '../../runtime/engine-types.js';
import { asHttpError } from '../http-server.js';
import type { HttpError } from '../openai-errors.js';
import type { RequestSource, ServingEngine } from '../serving-engine.js';
import type { RequestEndSink } from '../step-token-sink.js';
import type { ArrivalReader, ArrivalSpec } from './arrival-ring.js';
import type { RingWriter } from './token-ring.js';

/**
 * The engine's side of the arrival ring: a RequestSource the serving loop
 * polls at each step boundary. Each completion read is queued on the
 * ServingEngine (submit: the token ring's writer takes its tokens, this
 * intake hears of its end, both by its slot; no stream or promise per
 * request), or refused; the answers go back in the token ring (a refused
 * record per refusal, its error by message, then one admitted record per
 * poll, published with the step's tokens when one was queued), so while the
 * loop steps an arrival costs no message and no publish of its own.
 */

export interface IntakeHooks {
  /** A refused completion's error, sent after its refused record. */
  refused(slot: number, error: HttpError): void;
  /** A queued completion finished (its slot no longer in `requests`). */
  finished(slot: number, finished: FinishedRequest): void;
  /** A queued completion ended with an error or an abort. */
  ended(slot: number, error: HttpError): void;
}

/** Main-thread time spent receiving completions from the front end. */
export interface ArrivalStats {
  readonly requests: number;
  readonly microseconds: number;
}

export class ArrivalIntake implements RequestSource, RequestEndSink {
  /** The engine's request id of each slot in flight. */
  readonly requests = new Map<number, string>();
  private arrivals = 0;
  /** Arrivals the poll in progress queued on the engine. */
  private queued = 0;
  private arrivalUs = 0;
  private readonly visit = (slot: number, spec: ArrivalSpec): void => this.admit(slot, spec);

  constructor(
    private readonly reader: ArrivalReader,
    private readonly serving: ServingEngine,
    private readonly writer: RingWriter,
    private readonly hooks: IntakeHooks,
  ) {}

  /** Completions received so far, and the main thread's time in receiving and queueing them. */
  stats(): ArrivalStats {
    return { requests: this.arrivals, microseconds: this.arrivalUs };
  }

  poll(): void {
    if (!this.reader.pending) return;
    const started = performance.now();
    this.queued = 0;
    const count = this.reader.drain(this.visit);
    // A queued one makes the serving loop step next, and its delivery publishes the ring: the answer goes with it.
    this.writer.writeAdmitted(count, this.queued > 0);
    this.arrivals += count;
    this.arrivalUs += (performance.now() - started) * 1000;
  }

  sleeping(): void {
    this.reader.sleeping();
    this.poll();
  }

  awake(): void {
    this.reader.awake();
  }

  /** The front end published arrivals for a loop that sleeps (or has ended): read them now. */
  wake(): void {
    if (this.serving.sleeping) this.sleeping();
    else this.poll();
  }

  /** A queued completion finished (RequestEndSink). */
  finished(slot: number, finished: FinishedRequest): void {
    this.requests.delete(slot);
    this.hooks.finished(slot, finished);
  }

  /** A queued completion ended with an error or an abort (RequestEndSink). */
  failed(slot: number, error: unknown): void {
    this.requests.delete(slot);
    this.hooks.ended(slot, asHttpError(error));
  }

  private admit(slot: number, spec: ArrivalSpec): void {
    let id: string;
    try {
      // The front end keeps the tokens: the writer takes every ring-backed request's tokens in one pass per step, and its end comes back here by slot.
      // No stream, promise or AbortSignal per request: an abort names its slot (serving.abort).
      id = this.serving.submit(spec, slot, this.writer, this);
    } catch (error) {
      this.writer.writeRefused(slot);
      this.hooks.refused(slot, asHttpError(error));
      return;
    }
    this.requests.set(slot, id);
    this.queued++;
  }
}
