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

/**
 * One request's part of a step, as the connector sees it. The connector
 * reads the views only while it builds the step's metadata, so each request
 * keeps one view (`Request.connectorView`) and a step refills it in place.
 */
export class StepRequestView implements ScheduledRequestView {
  constructor(
    readonly request: Request,
    public blockIds: readonly number[],
    public numScheduledTokens: number,
    public fresh: boolean,
  ) {}

  /** The request's view for this step: its own view, refilled, or a new one the first time. */
  static of(request: Request, blockIds: readonly number[], numScheduledTokens: number, fresh: boolean): StepRequestView {
    const view = request.connectorView;
    if (view === null) return (request.connectorView = new StepRequestView(request, blockIds, numScheduledTokens, fresh));
    view.blockIds = blockIds;
    view.numScheduledTokens = numScheduledTokens;
    view.fresh = fresh;
    return view;
  }
}

/** A token sampled for a request that keeps running. */
export class SampledTokenUpdate {
  readonly newTokenIds: readonly number[];

  constructor(
    readonly reqId: string,
    token: number,
  ) {
    this.newTokenIds = singleToken(token);
  }
}

/**
 * Token ids below this get a shared one-token array; a larger one (no sane
 * vocabulary has one) is given a new array per use.
 */
const MAX_SHARED_TOKEN = 1 << 18;
/** The shared arrays by token id; filled densely (undefined where none yet), so it stays a flat array. */
const sharedSingleTokens: (readonly number[] | undefined)[] = [];

/**
 * `[token]`, frozen and shared by every step record that carries that one
 * token: a decode step sends and returns one token per request, and these
 * arrays were most of what such a step allocated.
 */
export function singleToken(token: number): readonly number[] {
  const shared = sharedSingleTokens;
  if (token < shared.length) {
    const ids = shared[token];
    if (ids !== undefined) return ids;
  }
  const ids = Object.freeze([token]);
  if (Number.isInteger(token) && token >= 0 && token < MAX_SHARED_TOKEN) {
    while (shared.length <= token) shared.push(undefined);
    shared[token] = ids;
  }
  return ids;
}

/** Above this, `new Array(n)` may start out as a dictionary: such a step's arrays grow as they are filled instead. */
const MAX_PRESIZED = 16384;

/** An array with room for `capacity` entries, to be filled by index from 0 and cut to length. */
export function presized<T>(capacity: number): T[] {
  return capacity > 0 && capacity <= MAX_PRESIZED ? new Array<T>(capacity) : [];
}
