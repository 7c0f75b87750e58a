import { Worker } from 'node:worker_threads';
import { threadCpuUs } from '../../core/thread-cpu.js';
import type { FinishedRequest } from '../../runtime/engine-types.js';
import { workerScript } from '../../runtime/worker-path.js';
import { FrontendThreadError } from '../errors.js';
import type { HttpFrontEnd } from '../http-front-end.js';
import { asHttpError, requestFailed, type ServedModel } from '../http-server.js';
import type { DrainOutcome, ServingEngine } from '../serving-engine.js';
import { ArrivalIntake, type ArrivalStats } from './arrival-intake.js';
import { arrivalRingWordsFor, ArrivalReader, createArrivalBuffer } from './arrival-ring.js';
import { createRingBuffer, FINISH_LENGTH, FINISH_STOPPED, ringWordsFor, RingWriter, STATE_DRAINING, STATE_STOPPED } from './token-ring.js';
import { toWire, type FrontendMessage, type FrontendThreadData, type MainMessage } from './wire.js';

export type { ArrivalStats } from './arrival-intake.js';

/**
 * The engine's side of an HTTP front-end thread: starts the thread
 * (workers/frontend-thread.ts), reads the completions it sends through the
 * arrival ring at each step boundary and queues them on the ServingEngine
 * (ArrivalIntake), writes their tokens, ends and answers into the token
 * ring, and answers its metrics requests. The scheduler's thread then
 * spends per step only the ring reads and writes and one publish; parsing,
 * tokenizing, framing and socket writes run on the front-end thread.
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

export class FrontendHost implements HttpFrontEnd {
  readonly failed: Promise<Error>;
  private reportFailure!: (error: Error) => void;
  private readonly writer: RingWriter;
  private readonly intake: ArrivalIntake;
  private readonly removeSource: () => void;
  private listening: { url: string; port: number; threadId: number | null } | null = null;
  private closing = false;
  private exited = false;
  private closedWaiter: (() => void) | null = null;

  private constructor(
    private readonly worker: Worker,
    private readonly options: FrontendHostOptions,
    ring: SharedArrayBuffer,
    arrivals: SharedArrayBuffer,
  ) {
    this.writer = new RingWriter(ring);
    const reader = new ArrivalReader(arrivals, () => this.post({ type: 'arrival-room' }));
    this.intake = new ArrivalIntake(reader, options.serving, this.writer, {
      refused: (slot, error) => this.send({ type: 'refused', slot, error: toWire(error) }),
      finished: (slot, finished) => this.finished(slot, finished),
      ended: (slot, error) => this.ended(slot, error),
    });
    this.removeSource = options.serving.addSource(this.intake);
    this.failed = new Promise<Error>((resolve) => {
      this.reportFailure = resolve;
    });
  }

  /** Starts the front-end thread and resolves once it listens; a listen error (EADDRINUSE...) rejects with its code. */
  static async start(options: FrontendHostOptions): Promise<FrontendHost> {
    const ring = createRingBuffer(options.ringWords ?? ringWordsFor(options.serving.engine.config.maxNumSeqs));
    const arrivals = createArrivalBuffer(arrivalRingWordsFor(options.model.maxModelLen));
    const data: FrontendThreadData = {
      ring,
      arrivals,
      host: options.host,
      port: options.port,
      modelName: options.model.modelName,
      vocabSize: options.model.vocabSize,
      maxModelLen: options.model.maxModelLen,
      streamInterval: options.streamInterval,
    };
    const worker = new Worker(workerScript('frontend-thread'), { name: 'kvtier-http', workerData: data });
    const host = new FrontendHost(worker, options, ring, arrivals);
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
    return tid === null ? null : threadCpuUs(tid);
  }

  /** Completions received from the front end so far, and the main thread's time in receiving and queueing them. */
  arrivalStats(): ArrivalStats {
    return this.intake.stats();
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
    this.removeSource();
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
      case 'wake':
        this.intake.wake();
        return;
      case 'abort': {
        const id = this.intake.requests.get(message.slot);
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

  private finished(slot: number, finished: FinishedRequest): void {
    if (finished.finishReason === 'error') {
      this.ended(slot, requestFailed(finished));
      return;
    }
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
    this.send({ type: 'failed', slot, error: toWire(error) });
  }

  /** Posts a message after every record written so far (a request's error never overtakes its tokens). */
  private send(message: MainMessage): void {
    if (this.exited) return;
    this.writer.after(() => this.worker.postMessage(message));
  }

  /** Posts a message that no record orders (room in the arrival ring). */
  private post(message: MainMessage): void {
    if (!this.exited) this.worker.postMessage(message);
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
    this.removeSource();
    for (const id of this.intake.requests.values()) this.options.serving.abort(id, error.message);
  }
}
