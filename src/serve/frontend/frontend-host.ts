import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { FinishedRequest } from '../../runtime/engine-types.js';
import { workerScript } from '../../runtime/worker-path.js';
import { FrontendThreadError } from '../errors.js';
import type { HttpFrontEnd } from '../http-front-end.js';
import { asHttpError, requestFailed, type ServedModel } from '../http-server.js';
import type { DrainOutcome, ServingEngine } from '../serving-engine.js';
import { createRingBuffer, FINISH_LENGTH, FINISH_STOPPED, ringWordsFor, RingWriter, STATE_DRAINING, STATE_STOPPED } from './token-ring.js';
import { toWire, unpackArrivals, type FrontendMessage, type FrontendThreadData, type MainMessage, type WireError } from './wire.js';

/**
 * The engine's side of an HTTP front-end thread: starts the thread
 * (workers/frontend-thread.ts), queues the completions it sends on the
 * ServingEngine, writes their tokens and ends into the token ring, and
 * answers its metrics requests. The scheduler's thread then spends per step
 * only the ring writes and one publish; parsing, tokenizing, framing and
 * socket writes run on the front-end thread.
 *
 * A front-end thread that dies (uncaught error, or an exit it was not
 * asked for) settles `failed` with a FrontendThreadError and aborts the
 * requests it had sent; the owner decides what to do (kvtier serve exits 1).
 */

export interface FrontendHostOptions {
  readonly serving: ServingEngine;
  /** The engine side's Prometheus text, which /metrics joins to the front end's counters. */
  readonly metricsText: () => Promise<string>;
  readonly model: ServedModel;
  readonly host: string;
  readonly port: number;
  readonly streamInterval: number;
  /** Ring size in Int32 words (a power of two); default ringWordsFor(maxNumSeqs). */
  readonly ringWords?: number;
}

/** Main-thread time spent receiving completions from the front end. */
export interface ArrivalStats {
  readonly requests: number;
  readonly microseconds: number;
}

export class FrontendHost implements HttpFrontEnd {
  readonly failed: Promise<Error>;
  private reportFailure!: (error: Error) => void;
  private readonly writer: RingWriter;
  /** The engine's request id of each slot in flight. */
  private readonly requests = new Map<number, string>();
  private listening: { url: string; port: number; threadId: number | null } | null = null;
  private closing = false;
  private exited = false;
  private closedWaiter: (() => void) | null = null;
  private arrivals = 0;
  private arrivalUs = 0;

  private constructor(
    private readonly worker: Worker,
    private readonly options: FrontendHostOptions,
    ring: SharedArrayBuffer,
  ) {
    this.writer = new RingWriter(ring);
    this.failed = new Promise<Error>((resolve) => {
      this.reportFailure = resolve;
    });
  }

  /** Starts the front-end thread and resolves once it listens; a listen error (EADDRINUSE...) rejects with its code. */
  static async start(options: FrontendHostOptions): Promise<FrontendHost> {
    const ring = createRingBuffer(options.ringWords ?? ringWordsFor(options.serving.engine.config.maxNumSeqs));
    const data: FrontendThreadData = {
      ring,
      host: options.host,
      port: options.port,
      modelName: options.model.modelName,
      vocabSize: options.model.vocabSize,
      maxModelLen: options.model.maxModelLen,
      streamInterval: options.streamInterval,
    };
    const worker = new Worker(workerScript('frontend-thread'), { name: 'kvtier-http', workerData: data });
    const host = new FrontendHost(worker, options, ring);
    await host.started();
    return host;
  }

  get url(): string {
    if (this.listening === null) throw new Error('the front end is not listening');
    return this.listening.url;
  }

  get port(): number {
    return this.listening?.port ?? 0;
  }

  /** The front-end thread itself (to watch it, or to stop it as a crash would). */
  get thread(): Worker {
    return this.worker;
  }

  /** CPU time of the front-end thread (Linux /proc/self/task/<tid>/schedstat), in microseconds; null where it cannot be read. */
  threadCpuUs(): number | null {
    const tid = this.listening?.threadId ?? null;
    if (tid === null) return null;
    try {
      const runNs = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'latin1').split(' ')[0]);
      return Number.isFinite(runNs) ? runNs / 1000 : null;
    } catch {
      return null;
    }
  }

  /** Completions received from the front end so far, and the main thread's time in receiving and queueing them. */
  arrivalStats(): ArrivalStats {
    return { requests: this.arrivals, microseconds: this.arrivalUs };
  }

  async drain(deadlineMs: number): Promise<DrainOutcome> {
    // Seen by the front end's next /health or completion without a message.
    this.writer.setState(STATE_DRAINING);
    const outcome = await this.options.serving.drain(deadlineMs);
    await this.closeFrontEnd();
    return outcome;
  }

  async close(): Promise<void> {
    this.closing = true;
    this.writer.setState(STATE_STOPPED);
    if (!this.exited) await this.worker.terminate();
  }

  private started(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let starting = true;
      this.worker.on('message', (message: FrontendMessage) => {
        if (message.type === 'listening') {
          this.listening = { url: message.url, port: message.port, threadId: message.threadId };
          starting = false;
          resolve();
        } else if (message.type === 'listen-failed') {
          starting = false;
          this.closing = true;
          void this.worker.terminate();
          reject(Object.assign(new Error(message.message), { code: message.code ?? undefined }));
        } else this.receive(message);
      });
      this.worker.on('error', (error) => {
        const failure = new FrontendThreadError(`the HTTP front-end thread failed: ${error.message}`, { cause: error });
        if (starting) reject(failure);
        this.fail(failure);
      });
      this.worker.on('exit', (code) => {
        this.exited = true;
        this.closedWaiter?.();
        const failure = new FrontendThreadError(`the HTTP front-end thread exited unexpectedly (exit code ${code})`);
        if (starting) reject(failure);
        if (!this.closing) this.fail(failure);
      });
    });
  }

  private receive(message: FrontendMessage): void {
    switch (message.type) {
      case 'arrivals':
        this.admit(message.packed, message.salts);
        return;
      case 'abort': {
        const id = this.requests.get(message.slot);
        if (id !== undefined) this.options.serving.abort(id, 'the client closed the connection');
        return;
      }
      case 'metrics':
        void this.options.metricsText().then(
          (text) => this.send({ type: 'metrics', id: message.id, text }),
          (error: unknown) => this.send({ type: 'metrics', id: message.id, text: `# the engine's metrics could not be read: ${String(error)}\n` }),
        );
        return;
      case 'room':
        this.writer.resume();
        return;
      case 'closed':
        this.closedWaiter?.();
        return;
      default:
        return;
    }
  }

  /** Queues one event-loop turn's completions on the engine; one answer names those refused. */
  private admit(packed: Uint32Array, salts: readonly (string | null)[] | null): void {
    const started = performance.now();
    const refused: { slot: number; error: WireError }[] = [];
    let count = 0;
    unpackArrivals(packed, salts, (slot, spec) => {
      count++;
      let stream;
      try {
        // The front end keeps the tokens: the writer takes every ring-backed request's tokens in one pass per step, the stream here keeps none.
        // No AbortSignal per request: an abort names its slot (serving.abort).
        stream = this.options.serving.stream(spec, { stepSink: this.writer, sinkKey: slot });
      } catch (error) {
        refused.push({ slot, error: toWire(asHttpError(error)) });
        return;
      }
      this.requests.set(slot, stream.id);
      stream.result.then(
        (finished) => this.finished(slot, finished),
        (error: unknown) => this.ended(slot, asHttpError(error)),
      );
    });
    this.send({ type: 'admitted', refused });
    this.arrivals += count;
    this.arrivalUs += (performance.now() - started) * 1000;
  }

  private finished(slot: number, finished: FinishedRequest): void {
    if (finished.finishReason === 'error') {
      this.ended(slot, requestFailed(finished));
      return;
    }
    this.requests.delete(slot);
    this.writer.writeFinish(slot, {
      reason: finished.finishReason === 'stopped' ? FINISH_STOPPED : FINISH_LENGTH,
      promptTokens: finished.promptTokens.length,
      gpuHitTokens: finished.gpuPrefixHitTokens,
      cpuHitTokens: finished.cpuTierHitTokens,
      remoteHitTokens: finished.remoteHitTokens,
      completionTokens: finished.outputTokens.length,
    });
  }

  private ended(slot: number, error: ReturnType<typeof asHttpError>): void {
    this.requests.delete(slot);
    this.send({ type: 'failed', slot, error: toWire(error) });
  }

  /** Posts a message after every record written so far (a request's error never overtakes its tokens). */
  private send(message: MainMessage): void {
    if (this.exited) return;
    this.writer.after(() => this.worker.postMessage(message));
  }

  /** Asks the front end to write out its responses and close its listener; resolves when it has (or has exited). */
  private async closeFrontEnd(): Promise<void> {
    if (this.exited) return;
    const closed = new Promise<void>((resolve) => {
      this.closedWaiter = resolve;
    });
    this.send({ type: 'close' });
    await closed;
    this.closing = true;
  }

  private fail(error: FrontendThreadError): void {
    this.writer.setState(STATE_STOPPED);
    this.reportFailure(error);
    // Nobody is left to read these requests' tokens: free their blocks.
    for (const id of this.requests.values()) this.options.serving.abort(id, error.message);
  }
}
