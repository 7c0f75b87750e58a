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
 * Distinct token ids kept as shared one-token arrays; past this many, a
 * one-token array is built per use (the ids of a sane vocabulary stay far below).
 */
const MAX_SHARED_TOKENS = 1 << 18;
const sharedSingleTokens = new Map<number, readonly number[]>();

/**
 * `[token]`, frozen and shared by every step record that carries that one
 * token: a decode step sends and returns one token per request, and these
 * arrays were most of what such a step allocated.
 */
export function singleToken(token: number): readonly number[] {
  const shared = sharedSingleTokens.get(token);
  if (shared !== undefined) return shared;
  const ids = Object.freeze([token]);
  if (sharedSingleTokens.size < MAX_SHARED_TOKENS) sharedSingleTokens.set(token, ids);
  return ids;
}

/** Above this, `new Array(n)` may start out as a dictionary: such a step's arrays grow as they are filled instead. */
const MAX_PRESIZED = 16384;

/** An array with room for `capacity` entries, to be filled by index from 0 and cut to length. */
export function presized<T>(capacity: number): T[] {
  return capacity > 0 && capacity <= MAX_PRESIZED ? new Array<T>(capacity) : [];
}
