import type { MessagePort } from 'node:worker_threads';
import type { CompletionBackend, CompletionOutcome, CompletionSpec, CompletionStream } from '../completion-backend.js';
import { ServingClosedError } from '../errors.js';
import { HttpError, invalidField } from '../openai-errors.js';
import { RequestStream } from '../request-stream.js';
import { ArrivalWriter, MAX_SALT_CHARS } from './arrival-ring.js';
import { FINISH_STOPPED, RingReader, STATE_DRAINING, STATE_SERVING, type FinishCounts, type RingVisitor } from './token-ring.js';
import { fromWire, type FrontendMessage, type MainMessage } from './wire.js';

/**
 * The HTTP layer's backend on the front-end thread: completions go to the
 * engine's thread through the arrival ring (published once per event-loop
 * turn; one message wakes its serving loop only when it sleeps), their
 * answers, tokens and ends come back through the token ring, their errors,
 * refusals' text and /metrics text by message. Every message from the
 * engine's thread is acted on after the token ring is read up to it, as its
 * sender published the ring before posting it.
 */

interface Pending {
  readonly slot: number;
  readonly stream: RequestStream<CompletionOutcome>;
  readonly resolve: (stream: CompletionStream) => void;
  readonly reject: (error: unknown) => void;
  /** A refused record named it: its error comes by message. */
  refused: boolean;
}

interface Entry {
  readonly stream: RequestStream<CompletionOutcome>;
  readonly promptTokens: readonly number[];
  /** Until the engine answered its arrival. */
  pending: Pending | null;
  /** Aborted by the client: told to the engine once it has queued the request. */
  abortWanted: boolean;
  abortSent: boolean;
}

/** Slots wrap here, far beyond the requests that can be in flight at once. */
const MAX_SLOT = 0x7fffffff;

export class CrossThreadBackend implements CompletionBackend, RingVisitor {
  private readonly reader: RingReader;
  private readonly arrivals: ArrivalWriter;
  private readonly entries = new Map<number, Entry>();
  /** Arrivals written and not yet answered, in the ring's order. */
  private unanswered: Pending[] = [];
  private readonly metricsWaiters = new Map<number, (text: string) => void>();
  private nextSlot = 1;
  private nextMetricsId = 1;
  private publishScheduled = false;
  private stopped = false;
  private readonly publishTask = (): void => this.publishArrivals();

  constructor(
    private readonly port: MessagePort,
    ring: SharedArrayBuffer,
    arrivals: SharedArrayBuffer,
    /** The engine's thread asked for the responses in flight to be written out and the listener closed. */
    private readonly onClose: () => Promise<void>,
  ) {
    this.reader = new RingReader(ring, () => this.post({ type: 'room' }));
    this.arrivals = new ArrivalWriter(arrivals);
    port.on('message', (message: MainMessage) => this.receive(message));
    void this.readLoop();
  }

  get accepting(): boolean {
    return this.reader.state === STATE_SERVING;
  }

  submit(spec: CompletionSpec, signal: AbortSignal): Promise<CompletionStream> {
    // The engine refuses too, but the shared state says so without a round trip.
    if (this.reader.state === STATE_DRAINING) return Promise.reject(new ServingClosedError('draining'));
    if (spec.cacheSalt !== null && spec.cacheSalt.length > MAX_SALT_CHARS) {
      return Promise.reject(invalidField('cache_salt', `expected at most ${MAX_SALT_CHARS} characters, got ${spec.cacheSalt.length}`));
    }
    const slot = this.nextSlot;
    this.nextSlot = this.nextSlot === MAX_SLOT ? 1 : this.nextSlot + 1;
    const stream = new RequestStream<CompletionOutcome>(String(slot), () => this.abort(slot));
    const entry: Entry = { stream, promptTokens: spec.promptTokens, pending: null, abortWanted: false, abortSent: false };
    const admitted = new Promise<CompletionStream>((resolve, reject) => {
      entry.pending = { slot, stream, resolve, reject, refused: false };
    });
    this.entries.set(slot, entry);
    this.unanswered.push(entry.pending!);
    signal.addEventListener('abort', () => this.abort(slot), { once: true });
    this.arrivals.append(slot, spec);
    if (!this.publishScheduled) {
      this.publishScheduled = true;
      setImmediate(this.publishTask);
    }
    return admitted;
  }

  metricsText(): Promise<string> {
    const id = this.nextMetricsId++;
    return new Promise<string>((resolve) => {
      this.metricsWaiters.set(id, resolve);
      this.post({ type: 'metrics', id });
    });
  }

  tokens(slot: number, tokens: number[]): void {
    this.entries.get(slot)?.stream.push(tokens);
  }

  finish(slot: number, counts: FinishCounts): void {
    const entry = this.entries.get(slot);
    if (entry === undefined) return;
    this.entries.delete(slot);
    const outputTokens = entry.stream.outputTokens;
    if (counts.completionTokens !== outputTokens.length || counts.promptTokens !== entry.promptTokens.length) {
      const message = `internal error: request ${slot} finished with ${counts.completionTokens} tokens of ${counts.promptTokens}-token prompt, the front end has ${outputTokens.length} of ${entry.promptTokens.length}`;
      entry.stream.fail(new HttpError(500, 'server_error', message, null, 'internal_error'));
      return;
    }
    entry.stream.finish({
      promptTokens: entry.promptTokens,
      outputTokens,
      finishReason: counts.reason === FINISH_STOPPED ? 'stopped' : 'length',
      errorMessage: null,
      gpuPrefixHitTokens: counts.gpuHitTokens,
      cpuTierHitTokens: counts.cpuHitTokens,
      remoteHitTokens: counts.remoteHitTokens,
    });
  }

  refused(slot: number): void {
    const pending = this.entries.get(slot)?.pending;
    if (pending !== null && pending !== undefined) pending.refused = true;
  }

  admitted(count: number): void {
    const answered = this.unanswered.splice(0, count);
    for (const pending of answered) {
      // A refused one is rejected when its error comes.
      if (pending.refused) continue;
      const entry = this.entries.get(pending.slot);
      if (entry !== undefined) {
        entry.pending = null;
        if (entry.abortWanted) this.sendAbort(pending.slot, entry);
      }
      pending.resolve(pending.stream);
    }
  }

  /** Makes this turn's arrivals visible to the engine's side; one message wakes its loop if it sleeps. */
  private publishArrivals(): void {
    this.publishScheduled = false;
    if (this.arrivals.publish()) this.post({ type: 'wake' });
  }

  private abort(slot: number): void {
    const entry = this.entries.get(slot);
    if (entry === undefined || entry.abortWanted) return;
    entry.abortWanted = true;
    // The engine learns of the slot from the arrival ring: it is told to abort once it has answered the arrival.
    if (entry.pending === null) this.sendAbort(slot, entry);
  }

  private sendAbort(slot: number, entry: Entry): void {
    if (entry.abortSent) return;
    entry.abortSent = true;
    this.post({ type: 'abort', slot });
  }

  private receive(message: MainMessage): void {
    this.reader.drain(this);
    switch (message.type) {
      case 'refused': {
        const entry = this.entries.get(message.slot);
        if (entry === undefined) return;
        this.entries.delete(message.slot);
        entry.pending?.reject(fromWire(message.error));
        return;
      }
      case 'arrival-room':
        this.arrivals.resume();
        this.publishArrivals();
        return;
      case 'failed': {
        const entry = this.entries.get(message.slot);
        if (entry === undefined) return;
        this.entries.delete(message.slot);
        entry.stream.fail(fromWire(message.error));
        return;
      }
      case 'metrics':
        this.metricsWaiters.get(message.id)?.(message.text);
        this.metricsWaiters.delete(message.id);
        return;
      case 'close':
        this.stopped = true;
        void this.onClose().then(() => this.post({ type: 'closed' }));
        return;
      default:
        return;
    }
  }

  private async readLoop(): Promise<void> {
    while (!this.stopped) {
      this.reader.drain(this);
      await this.reader.published();
    }
  }

  private post(message: FrontendMessage): void {
    this.port.postMessage(message);
  }
}
