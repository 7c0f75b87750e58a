import type { ScheduledRequestView } from './connector.js';
import type { ScheduledRequest } from '../protocol/step-protocol.js';
import type { Request } from './request.js';

/**
 * The records the scheduler creates for every request in every step, built
 * by constructors rather than object and array literals. V8 tracks literals
 * per allocation site and, after one large step (a prefill batch of
 * thousands of requests) in which they all survived a minor GC, allocates
 * that site's objects directly in the old generation from then on: every
 * later step's short-lived records would then cost a major GC to reclaim.
 * Constructed objects carry no allocation site, so they always start young.
 * They are plain data (own fields only) and cross threads like literals do.
 */

/** One request's part of a step, as the workers get it. */
export class StepRequest implements ScheduledRequest {
  constructor(
    readonly reqId: string,
    readonly blockIds: readonly number[] | null,
    readonly newBlockIds: readonly number[],
    readonly startPosition: number,
    readonly tokens: readonly number[],
    readonly sample: boolean,
    readonly seed: number,
  ) {}
}

/** One request's part of a step, as the connector sees it. */
export class StepRequestView implements ScheduledRequestView {
  constructor(
    readonly request: Request,
    readonly blockIds: readonly number[],
    readonly numScheduledTokens: number,
    readonly fresh: boolean,
  ) {}
}

/** A token sampled for a request that keeps running. */
export class SampledTokenUpdate {
  readonly newTokenIds: readonly number[];

  constructor(
    readonly reqId: string,
    token: number,
  ) {
    const ids = new Array<number>(1);
    ids[0] = token;
    this.newTokenIds = ids;
  }
}

/** Above this, `new Array(n)` may start out as a dictionary: such a step's arrays grow as they are filled instead. */
const MAX_PRESIZED = 16384;

/** An array with room for `capacity` entries, to be filled by index from 0 and cut to length. */
export function presized<T>(capacity: number): T[] {
  return capacity > 0 && capacity <= MAX_PRESIZED ? new Array<T>(capacity) : [];
}
