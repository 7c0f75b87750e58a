import { ERROR_CODES } from '../core/error-codes.js';
import type { Publisher, Router } from 'zeromq';
import { KvtierError } from '../core/errors.js';
import type { KvEventBatch } from './kv-cache-events.js';
import type { KvRecordBatch } from './kv-event-records.js';
import type { KvEventSource } from './kv-event-stream.js';
import { KvEventWireEncoder, type KvEventEncoding } from './vllm-wire.js';

/**
 * Publishes an engine's KV event batches over ZeroMQ as vLLM's
 * `ZmqEventPublisher` does, so subscribers written for vLLM read them as they are:
 *
 * - a PUB socket sends each batch as three frames `[topic, seq, payload]`:
 *   the topic's UTF-8 bytes, the batch's sequence number (from 0, one more
 *   per batch) as 8 bytes big-endian, and the msgpack batch (vllm-wire.ts);
 * - the endpoint is bound when it has a wildcard (`tcp://*:5557`, `::`) or is
 *   `ipc://` / `inproc://`, and connected to otherwise (vLLM's rule);
 * - with a replay endpoint, a ROUTER socket bound there answers a request
 *   `[start seq, 8 bytes big-endian]` with every buffered batch from that
 *   sequence number on, each as `[seq, payload]`, then `[-1 as 8 bytes, empty]`.
 */

export interface KvEventPublisherOptions {
  /** PUB endpoint, e.g. `tcp://*:5557` (bind) or `tcp://router-host:5557` (connect). */
  readonly endpoint: string;
  /** Topic frame of every message (default '', vLLM's default). */
  readonly topic?: string;
  /** ROUTER endpoint answering replay requests (default: none). */
  readonly replayEndpoint?: string | null;
  /** Batches kept for replay (default 10000). */
  readonly bufferSteps?: number;
  /** PUB send high-water mark, in messages (default 100000). */
  readonly hwm?: number;
  /** How events are encoded (default 'map', vLLM's current format). */
  readonly encoding?: KvEventEncoding;
  /** The `data_parallel_rank` batches carry (default 0). */
  readonly dataParallelRank?: number;
}

/** A publisher option is malformed, or its socket could not bind or connect. */
export class KvEventPublisherError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.kvEventsPublisher, message, options);
  }
}

const DEFAULT_BUFFER_STEPS = 10_000;
const DEFAULT_HWM = 100_000;
/** How long closing waits for queued messages to reach connected subscribers (ms). */
const CLOSE_LINGER_MS = 1_000;
const ENDPOINT_PATTERN = /^(tcp|ipc|inproc):\/\/.+/;

/**
 * How long a replay waits for a client that stopped reading before it gives
 * that client's replay up (ms). Until then the ROUTER socket holds back
 * rather than drops: a late subscriber reading slowly still gets every batch.
 */
const REPLAY_SEND_TIMEOUT_MS = 10_000;

/** The end-of-replay marker: sequence -1 as 8 signed bytes. */
const END_SEQ = Buffer.alloc(8, 0xff);

/** A sequence number (a safe integer >= 0) as 8 bytes big-endian, without a BigInt (one per batch). */
function seqBytes(seq: number): Buffer {
  const bytes = Buffer.allocUnsafe(8);
  bytes.writeUInt32BE(Math.floor(seq / 0x100000000), 0);
  bytes.writeUInt32BE(seq >>> 0, 4);
  return bytes;
}

/** vLLM binds an endpoint with a wildcard or a local transport and connects to any other. */
export function bindsEndpoint(endpoint: string): boolean {
  return endpoint.includes('*') || endpoint.includes('::') || endpoint.startsWith('ipc://') || endpoint.startsWith('inproc://');
}

function checkEndpoint(name: string, endpoint: unknown): string {
  if (typeof endpoint !== 'string' || !ENDPOINT_PATTERN.test(endpoint)) {
    throw new KvEventPublisherError(`${name} must be a ZeroMQ endpoint such as tcp://*:5557 (tcp://, ipc:// or inproc://), got ${JSON.stringify(endpoint)}`);
  }
  return endpoint;
}

function checkCount(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min) throw new KvEventPublisherError(`${name} must be an integer >= ${min}, got ${String(value)}`);
  return value;
}

export class KvEventPublisher {
  private readonly encoder: KvEventWireEncoder;
  private readonly topic: Buffer;
  private readonly bufferSteps: number;
  /** The last `bufferSteps` payloads: batch `seq` at index seq % bufferSteps (a ring: no shift of thousands per step). */
  private readonly replayBuffer: Uint8Array[] = [];
  private nextSeq = 0;
  /** Sends go out one at a time, in sequence order. */
  private sending: Promise<void> = Promise.resolve();
  private sendFailure: Error | null = null;
  private closed = false;
  private replayLoop: Promise<void> | null = null;

  private constructor(
    private readonly pub: Publisher,
    private readonly router: Router | null,
    options: KvEventPublisherOptions,
    /** The PUB endpoint as bound (the port chosen for `:*`) or as connected to. */
    readonly endpoint: string,
    /** The replay endpoint as bound, or null. */
    readonly replayEndpoint: string | null,
  ) {
    this.encoder = new KvEventWireEncoder(options.encoding ?? 'map', options.dataParallelRank ?? 0);
    this.topic = Buffer.from(options.topic ?? '', 'utf8');
    this.bufferSteps = checkCount('bufferSteps', options.bufferSteps, DEFAULT_BUFFER_STEPS, 1);
    if (router !== null) this.replayLoop = this.serveReplays(router);
  }

  /** Opens the sockets (binding or connecting as vLLM does); errors name the endpoint. */
  static async start(options: KvEventPublisherOptions): Promise<KvEventPublisher> {
    const endpoint = checkEndpoint('endpoint', options.endpoint);
    const replay = options.replayEndpoint == null ? null : checkEndpoint('replayEndpoint', options.replayEndpoint);
    if (options.encoding !== undefined && options.encoding !== 'map' && options.encoding !== 'array') {
      throw new KvEventPublisherError(`encoding must be 'map' or 'array', got ${JSON.stringify(options.encoding)}`);
    }
    if (options.topic !== undefined && typeof options.topic !== 'string') {
      throw new KvEventPublisherError(`topic must be text (may be empty), got ${JSON.stringify(options.topic)}`);
    }
    checkCount('dataParallelRank', options.dataParallelRank, 0, 0);
    checkCount('bufferSteps', options.bufferSteps, DEFAULT_BUFFER_STEPS, 1);
    // Loaded here, not at import: an engine that publishes nothing never loads ZeroMQ's native addon.
    const zmq = await import('zeromq');
    const pub = new zmq.Publisher({ sendHighWaterMark: checkCount('hwm', options.hwm, DEFAULT_HWM, 1), linger: CLOSE_LINGER_MS });
    let router: Router | null = null;
    try {
      let bound = endpoint;
      if (bindsEndpoint(endpoint)) {
        await pub.bind(endpoint);
        bound = pub.lastEndpoint ?? endpoint;
      } else {
        pub.connect(endpoint);
      }
      let replayBound: string | null = null;
      if (replay !== null) {
        // Mandatory: a reply to a client whose queue is full waits (up to the send timeout) instead of being
        // dropped, which a plain ROUTER does silently once a replay outruns the client's high-water mark.
        router = new zmq.Router({ linger: 0, mandatory: true, sendTimeout: REPLAY_SEND_TIMEOUT_MS });
        await router.bind(replay);
        replayBound = router.lastEndpoint ?? replay;
      }
      return new KvEventPublisher(pub, router, options, bound, replayBound);
    } catch (error) {
      pub.close();
      router?.close();
      throw new KvEventPublisherError(`cannot open KV event sockets at ${endpoint}${replay ? ` / ${replay}` : ''}: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Publishes every batch `source` produces from now on; returns the function that stops it. */
  attach(source: KvEventSource): () => void {
    return source.addKvEventListener((batch) => this.publish(batch));
  }

  /** Sends one batch with the next sequence number (queued behind earlier sends; never blocks the caller). */
  publish(batch: KvEventBatch): void {
    if (this.closed) throw new KvEventPublisherError('the KV event publisher is closed');
    this.send(this.encoder.encode(batch));
  }

  /** publish() for a batch read from the KV event ring as integers (the KV event thread's form): the same bytes. */
  publishRecords(batch: KvRecordBatch): void {
    if (this.closed) throw new KvEventPublisherError('the KV event publisher is closed');
    this.send(this.encoder.encodeRecords(batch));
  }

  private send(payload: Uint8Array): void {
    const seq = this.nextSeq++;
    this.replayBuffer[seq % this.bufferSteps] = payload;
    const frames = [this.topic, seqBytes(seq), payload];
    this.sending = this.sending.then(() =>
      this.pub.send(frames).catch((error: unknown) => {
        this.sendFailure ??= error as Error;
      }),
    );
  }

  /** Batches published so far (the next sequence number). */
  get published(): number {
    return this.nextSeq;
  }

  /** The first send that failed, if any (a PUB socket drops rather than fails, so normally null). */
  get failure(): Error | null {
    return this.sendFailure;
  }

  /** Resolves once every batch published so far was handed to the socket. */
  async drain(): Promise<void> {
    await this.sending;
  }

  /** Sends what is queued, then closes the sockets. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.sending;
    this.pub.close();
    this.router?.close();
    await this.replayLoop;
  }

  /** Answers replay requests until the ROUTER socket closes. */
  private async serveReplays(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        // [client identity, empty delimiter, start seq]; anything else is not a replay request.
        if (frames.length !== 3 || frames[2].length !== 8) continue;
        const [client] = frames;
        const start = frames[2].readBigUInt64BE();
        // Batches published while the replay is sent must not change it: send from a copy, oldest first.
        const end = this.nextSeq;
        const first = Math.max(0, end - this.bufferSteps);
        const buffered = Array.from({ length: end - first }, (_, i) => this.replayBuffer[(first + i) % this.bufferSteps]);
        try {
          for (let i = 0; i < buffered.length; i++) {
            const seq = first + i;
            if (BigInt(seq) >= start) await router.send([client, '', seqBytes(seq), buffered[i]]);
          }
          await router.send([client, '', END_SEQ, '']);
        } catch {
          // The client left or stopped reading: its replay ends, the next request is served.
          if (this.closed) return;
        }
      }
    } catch (error) {
      // Closing the socket ends the loop; any other failure stops replays only.
      if (!this.closed) this.sendFailure ??= error as Error;
    }
  }
}
