import type { FinishedRequest } from '../runtime/engine-types.js';

/**
 * A receiver of many requests' tokens in one pass per step: the serving
 * loop opens it once, hands it each of its requests' new tokens by the key
 * the request was submitted with, and closes it once. A consumer that
 * serves hundreds of streams (the HTTP front-end thread's token ring) then
 * checks for room and publishes once per step, not once per request, and
 * needs no object per request. The arrays are the step's: copy what is kept.
 */
export interface StepTokenSink {
  /** Before a step's delivery: at most `requests` calls of tokens() follow, one per request. */
  beginStep(requests: number): void;
  /** The new tokens of the request submitted with `key` (ServingEngine.submit). */
  tokens(key: number, tokens: readonly number[]): void;
  /**
   * tokens(key, [token]) for a step that gave the request one token (a
   * decode step's usual delivery), handed over as a number. Optional: a sink
   * without it gets tokens().
   */
  token?(key: number, token: number): void;
  /** After the step's delivery: what was handed in may be made visible. */
  endStep(): void;
}

/**
 * How each request submitted with ServingEngine.submit ends, by its key:
 * in place of a RequestStream and its promise, so a consumer of many
 * requests (the HTTP front-end thread's intake) allocates nothing per
 * request to learn of its end. Called from the serving loop (or from
 * drain/close); what a call throws is rethrown as an uncaught error.
 */
export interface RequestEndSink {
  /** The request finished: any reason but an abort (`error` included, as a stream's result resolves with it). */
  finished(key: number, finished: FinishedRequest): void;
  /** It ended without finishing: aborted (RequestAbortedError), or the engine stopped (its error). */
  failed(key: number, error: unknown): void;
}
