import type { FinishedRequest } from '../runtime/engine-types.js';
import type { TokenSink } from './request-stream.js';

/**
 * What the HTTP layer (http-server.ts) needs of the engine behind it, and no
 * more: queue a completion, receive its tokens and its end, abort it, read
 * the engine's metrics. Two implementations: in-process (the ServingEngine
 * on the same thread, in-process-backend.ts) and cross-thread (the HTTP
 * server on a front-end thread, the engine on the main thread:
 * frontend/cross-thread-backend.ts).
 */

/** What a completion response is built from: a finished request's outputs and per-tier hits. */
export type CompletionOutcome = Pick<FinishedRequest, 'outputTokens' | 'finishReason' | 'errorMessage' | 'gpuPrefixHitTokens' | 'cpuTierHitTokens' | 'remoteHitTokens'> & {
  readonly promptTokens: ArrayLike<number>;
};

/** A completion's parameters as the engine takes them. */
export interface CompletionSpec {
  readonly promptTokens: readonly number[];
  readonly maxTokens: number;
  readonly seed: number;
  readonly cacheSalt: string | null;
}

/** One queued completion: its tokens go to an attached sink as they come, `result` holds its end. */
export interface CompletionStream {
  /** Sends the tokens so far, then each later batch, to `sink` (synchronously, no promise per token). */
  attach(sink: TokenSink): void;
  /** The finished request; rejects with the reason it ended early. */
  readonly result: Promise<CompletionOutcome>;
  readonly done: boolean;
}

export interface CompletionBackend {
  /**
   * Queues a completion; aborting `signal` aborts it. Rejects (nothing
   * queued) with the refusal: RequestError, QueueFullError,
   * ServingClosedError, EngineStoppedError, or an HttpError carrying one.
   */
  submit(spec: CompletionSpec, signal: AbortSignal): Promise<CompletionStream>;
  /** false once the engine drains, closes or stopped: /health answers 503. */
  readonly accepting: boolean;
  /** The engine side's Prometheus text (its registry and the serving gauges). */
  metricsText(): Promise<string>;
}
