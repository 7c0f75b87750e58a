import { ERROR_CODES } from '../core/error-codes.js';
import { KvtierError } from '../core/errors.js';
import type { FinishedRequest } from '../runtime/engine-types.js';

/**
 * Errors of the serving layer, each with a stable code: a caller (or the HTTP
 * server, which maps them to status codes) branches on the class or the code.
 */

/** The waiting queue is full: the request was not queued (HTTP 429). */
export class QueueFullError extends KvtierError {
  readonly limit: number;

  constructor(limit: number) {
    super(ERROR_CODES.queueFull, `the waiting queue is full (${limit} requests wait already); retry later`);
    this.limit = limit;
  }
}

/** The server is draining or closed and takes no new requests (HTTP 503). */
export class ServingClosedError extends KvtierError {
  constructor(why: 'draining' | 'closed') {
    super(
      why === 'draining' ? ERROR_CODES.draining : ERROR_CODES.servingClosed,
      why === 'draining' ? 'the server is shutting down and takes no new requests' : 'the serving engine is closed',
    );
  }
}

/**
 * A request ended before it finished: its signal was aborted, or the server
 * stopped it (drain deadline, close). `partial` holds what it had generated,
 * null when it never reached the engine.
 */
export class RequestAbortedError extends KvtierError {
  readonly partial: FinishedRequest | null;
  readonly outputTokens: readonly number[];

  constructor(message: string, outputTokens: readonly number[], partial: FinishedRequest | null = null, options?: { cause?: unknown }) {
    super(ERROR_CODES.aborted, message, options);
    this.outputTokens = outputTokens;
    this.partial = partial;
  }
}

/** The HTTP front-end thread died (an uncaught error or an exit it was not asked for), or could not start. */
export class FrontendThreadError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.frontendThread, message, options);
  }
}
