import type { MessagePort } from 'node:worker_threads';
import type { CompletionBackend, CompletionOutcome, CompletionSpec, CompletionStream } from '../completion-backend.js';
import { ServingClosedError } from '../errors.js';
import { HttpError } from '../openai-errors.js';
import { RequestStream } from '../request-stream.js';
import { FINISH_STOPPED, RingReader, STATE_DRAINING, STATE_SERVING, type FinishCounts, type RingVisitor } from './token-ring.js';
import { fromWire, packArrivals, type Arrival, type FrontendMessage, type MainMessage } from './wire.js';

/**
 * The HTTP layer's backend on the front-end thread: completions go to the
 * engine's thread in one message per event-loop turn (packed, transferred),
 * their tokens and ends come back through the token ring, their errors,
 * refusals and /metrics text by message. Every message from the engine's
 * thread is acted on after the ring is read up to it, as its sender
 * published the ring before posting it.
 */

interface Entry {
  readonly stream: RequestStream<CompletionOutcome>;
  readonly promptTokens: readonly number[];
  abortSent: boolean;
}

interface Pending {
  readonly slot: number;
  readonly stream: RequestStream<CompletionOutcome>;
  readonly resolve: (stream: CompletionStream) => void;
  readonly reject: (error: unknown) => void;
}

/** Slots wrap here, far beyond the requests that can be in flight at once. */
const MAX_SLOT = 0x7fffffff;

export class CrossThreadBackend implements CompletionBackend, RingVisitor {
  private readonly reader: RingReader;
  private readonly entries = new Map<number, Entry>();
  private arrivals: Arrival[] = [];
  private arrivalPending: Pending[] = [];
  /** Sent arrivals messages awaiting their 'admitted' answer, in order. */
  private readonly admissions: Pending[][] = [];
  private readonly metricsWaiters = new Map<number, (text: string) => void>();
  private nextSlot = 1;
  private nextMetricsId = 1;
  private flushScheduled = false;
  private stopped = false;

  constructor(
    private readonly port: MessagePort,
    ring: SharedArrayBuffer,
    /** The engine's thread asked for the responses in flight to be written out and the listener closed. */
    private readonly onClose: () => Promise<void>,
  ) {
    this.reader = new RingReader(ring, () => this.post({ type: 'room' }));
    port.on('message', (message: MainMessage) => this.receive(message));
    void this.readLoop();
  }

  get accepting(): boolean {
    return this.reader.state === STATE_SERVING;
  }

  submit(spec: CompletionSpec, signal: AbortSignal): Promise<CompletionStream> {
    // The engine refuses too, but the shared state says so without a round trip.
    if (this.reader.state === STATE_DRAINING) return Promise.reject(new ServingClosedError('draining'));
    const slot = this.nextSlot;
    this.nextSlot = this.nextSlot === MAX_SLOT ? 1 : this.nextSlot + 1;
    const stream = new RequestStream<CompletionOutcome>(String(slot), () => this.abort(slot));
    this.entries.set(slot, { stream, promptTokens: spec.promptTokens, abortSent: false });
    signal.addEventListener('abort', () => this.abort(slot), { once: true });
    this.arrivals.push({ slot, ...spec });
    const admitted = new Promise<CompletionStream>((resolve, reject) => this.arrivalPending.push({ slot, stream, resolve, reject }));
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flushArrivals());
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

  /** Sends this turn's completions in one message. */
  private flushArrivals(): void {
    this.flushScheduled = false;
    if (this.arrivals.length === 0) return;
    const { packed, salts } = packArrivals(this.arrivals);
    this.admissions.push(this.arrivalPending);
    this.arrivals = [];
    this.arrivalPending = [];
    this.port.postMessage({ type: 'arrivals', packed, salts } satisfies FrontendMessage, [packed.buffer as ArrayBuffer]);
  }

  private abort(slot: number): void {
    const entry = this.entries.get(slot);
    if (entry === undefined || entry.abortSent) return;
    entry.abortSent = true;
    // Its arrival goes first, so the engine knows the slot it is told to abort.
    this.flushArrivals();
    this.post({ type: 'abort', slot });
  }

  private receive(message: MainMessage): void {
    this.reader.drain(this);
    switch (message.type) {
      case 'admitted': {
        const batch = this.admissions.shift() ?? [];
        const refused = new Map(message.refused.map((r) => [r.slot, r.error]));
        for (const pending of batch) {
          const error = refused.get(pending.slot);
          if (error === undefined) {
            pending.resolve(pending.stream);
          } else {
            this.entries.delete(pending.slot);
            pending.reject(fromWire(error));
          }
        }
        return;
      }
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
