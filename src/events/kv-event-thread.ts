import { Worker } from 'node:worker_threads';
import { threadCpuUs } from '../core/thread-cpu.js';
import { workerScript } from '../runtime/worker-path.js';
import type { KvEventCollector } from './kv-cache-events.js';
import { KvEventPublisherError, type KvEventPublisherOptions } from './kv-event-publisher.js';
import { createKvEventRingBuffer, DEFAULT_KV_EVENT_RING_WORDS, KvEventRingWriter } from './kv-event-ring.js';
import type { KvEventHostMessage, KvEventThreadData, KvEventThreadMessage } from './kv-event-thread-wire.js';

/** Whatever feeds a collector each step: an Engine. */
export interface KvEventCollectorHost {
  addKvEventCollector(collector: KvEventCollector): () => void;
}

export interface KvEventThreadOptions extends KvEventPublisherOptions {
  /** Ring size in Int32 words (a power of two, at least 32); default 2^18 (1 MiB). */
  readonly ringWords?: number;
  /**
   * While steps keep coming, the thread reads the ring every this many
   * milliseconds instead of being woken for each step: one wake-up then
   * handles every step of the window, and the engine's thread does not
   * notify it. A batch waits at most this long more before it is sent.
   * 0: woken for every step. Default 5.
   */
  readonly batchWindowMs?: number;
}

export const DEFAULT_KV_EVENT_BATCH_WINDOW_MS = 5;
/** Longest batching window: the ring (1 MiB by default) holds hundreds of saturated steps, far more than this many milliseconds of them. */
const MAX_BATCH_WINDOW_MS = 1000;

/**
 * KV events published from a thread of their own, as KvEventPublisher does
 * in-process (same sockets, framing, sequence numbers, replay and bytes):
 * the engine's thread writes each event's integers into a shared ring
 * (kv-event-ring.ts) and publishes once per step; the KV event thread
 * (kv-event-thread-main.ts) builds the batches, encodes them and sends them.
 * So the engine's thread spends per step only the ring writes. While steps
 * keep coming the thread reads on a timer (batchWindowMs), each wake-up
 * handling every step since the last, and sleeps on the ring (woken by the
 * next publish) once a window brought nothing.
 *
 * One engine is attached at a time (kvtier run's runs follow one another).
 * If the thread dies, attached engines are detached (nothing is left to
 * read the ring) and `failure` says why.
 */
export class KvEventThread {
  private readonly writer: KvEventRingWriter;
  private readonly detachers = new Set<() => void>();
  private ready: Extract<KvEventThreadMessage, { type: 'ready' }> | null = null;
  private closedWaiter: ((message: Extract<KvEventThreadMessage, { type: 'closed' }> | null) => void) | null = null;
  private exited = false;
  private closed = false;
  private failureError: Error | null = null;
  private publishedAtClose: number | null = null;

  private constructor(
    private readonly worker: Worker,
    ring: SharedArrayBuffer,
  ) {
    this.writer = new KvEventRingWriter(ring);
  }

  /** Starts the thread and resolves once its sockets are open; a bad option or a socket that cannot open rejects with KvEventPublisherError. */
  static async start(options: KvEventThreadOptions): Promise<KvEventThread> {
    const { ringWords, batchWindowMs = DEFAULT_KV_EVENT_BATCH_WINDOW_MS, ...publisher } = options;
    let ring: SharedArrayBuffer;
    try {
      ring = createKvEventRingBuffer(ringWords ?? DEFAULT_KV_EVENT_RING_WORDS);
    } catch (error) {
      throw new KvEventPublisherError((error as Error).message, { cause: error });
    }
    if (typeof batchWindowMs !== 'number' || !Number.isFinite(batchWindowMs) || batchWindowMs < 0 || batchWindowMs > MAX_BATCH_WINDOW_MS) {
      throw new KvEventPublisherError(`batchWindowMs must be a number of milliseconds in [0, ${MAX_BATCH_WINDOW_MS}], got ${String(batchWindowMs)}`);
    }
    const data: KvEventThreadData = { ring, batchWindowMs, publisher };
    const worker = new Worker(workerScript('kv-event-thread'), { name: 'kvtier-kv-events', workerData: data });
    const thread = new KvEventThread(worker, ring);
    await thread.started();
    return thread;
  }

  /** The PUB endpoint as bound (the port chosen for `:*`) or as connected to. */
  get endpoint(): string {
    return this.readyMessage().endpoint;
  }

  /** The replay endpoint as bound, or null. */
  get replayEndpoint(): string | null {
    return this.readyMessage().replayEndpoint;
  }

  /** Feeds the ring `host`'s events from now on; returns the function that stops it. */
  attach(host: KvEventCollectorHost): () => void {
    if (this.closed || this.failureError !== null) throw new KvEventPublisherError('the KV event thread is closed');
    const stop = host.addKvEventCollector(this.writer);
    const detach = (): void => {
      if (!this.detachers.delete(detach)) return;
      stop();
      // A step cut short leaves records without their batch's end: they form a batch of their own, not part of the next engine's first.
      this.writer.flush(Date.now() / 1000);
    };
    this.detachers.add(detach);
    return detach;
  }

  /** Publishes a batch of one AllBlocksCleared event (an engine that starts empty after another), in order with the engine's batches. */
  clearAll(): void {
    if (this.closed || this.failureError !== null) return;
    this.writer.sinkFor('GPU', 1).cleared();
    this.writer.flush(Date.now() / 1000);
  }

  /** Batches published so far (the next sequence number): every batch written, once closed. */
  get published(): number {
    return this.publishedAtClose ?? this.writer.handedOn;
  }

  /** Batches the engine's side has written so far. */
  get written(): number {
    return this.writer.written;
  }

  /** Resolves once the thread has encoded and published (handed to the socket's queue) every batch written so far. */
  caughtUp(): Promise<void> {
    return this.writer.caughtUp();
  }

  /** Why the thread stopped early, or null. */
  get failure(): Error | null {
    return this.failureError;
  }

  /** CPU time of the KV event thread (Linux /proc/self/task/<tid>/schedstat), in microseconds; null where it cannot be read. */
  threadCpuUs(): number | null {
    const tid = this.ready?.threadId ?? null;
    return tid === null ? null : threadCpuUs(tid);
  }

  /** Detaches every engine, has the thread publish what was written and send what is queued, then ends it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const detach of [...this.detachers]) detach();
    if (!this.exited) {
      const closed = new Promise<Extract<KvEventThreadMessage, { type: 'closed' }> | null>((resolve) => {
        this.closedWaiter = resolve;
      });
      this.writer.after(() => this.post({ type: 'close' }));
      const message = await closed;
      if (message !== null) {
        this.publishedAtClose = message.published;
        if (message.failure !== null) this.failureError ??= new KvEventPublisherError(`a KV event send failed: ${message.failure}`);
      }
      await this.worker.terminate();
    }
  }

  private readyMessage(): Extract<KvEventThreadMessage, { type: 'ready' }> {
    if (this.ready === null) throw new KvEventPublisherError('the KV event thread has not started');
    return this.ready;
  }

  private post(message: KvEventHostMessage): void {
    if (!this.exited) this.worker.postMessage(message);
  }

  private started(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let starting = true;
      this.worker.on('message', (message: KvEventThreadMessage) => {
        switch (message.type) {
          case 'ready':
            this.ready = message;
            starting = false;
            resolve();
            return;
          case 'start-failed':
            starting = false;
            this.closed = true;
            void this.worker.terminate();
            reject(new KvEventPublisherError(message.message));
            return;
          case 'room':
            this.writer.resume();
            return;
          case 'closed':
            this.closedWaiter?.(message);
            return;
        }
      });
      this.worker.on('error', (error) => {
        const failure = new KvEventPublisherError(`the KV event thread failed: ${error.message}`, { cause: error });
        if (starting) reject(failure);
        this.fail(failure);
      });
      this.worker.on('exit', (code) => {
        this.exited = true;
        this.closedWaiter?.(null);
        if (starting) reject(new KvEventPublisherError(`the KV event thread exited while starting (exit code ${code})`));
        else if (!this.closed) this.fail(new KvEventPublisherError(`the KV event thread exited unexpectedly (exit code ${code})`));
      });
    });
  }

  private fail(error: Error): void {
    this.failureError ??= error;
    // Nothing reads the ring any more: stop writing into it.
    for (const detach of [...this.detachers]) detach();
  }
}
