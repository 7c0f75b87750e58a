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
  /** The new tokens of the request submitted with `key` (SubmitOptions.sinkKey). */
  tokens(key: number, tokens: readonly number[]): void;
  /** After the step's delivery: what was handed in may be made visible. */
  endStep(): void;
}
