import type { ScheduledRequestView } from './connector-port.js';
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

/**
 * One request's part of a step, as the workers get it. Each request keeps
 * one (`Request.stepRecord`) and every step that schedules it refills it in
 * place, so a decode step allocates no record per request: a step's records
 * are valid until the next schedule() (docs/architecture.md, "One engine
 * step"); the engine's ranks get a structured clone of them.
 */
export class StepRequest implements ScheduledRequest {
  constructor(
    public reqId: string,
    public blockIds: readonly number[] | null,
    public newBlockIds: readonly number[],
    public startPosition: number,
    public tokens: readonly number[],
    public sample: boolean,
    public seed: number,
  ) {}

  /** The request's record for this step: its own record, refilled, or a new one the first time. */
  static of(
    request: Request,
    blockIds: readonly number[] | null,
    newBlockIds: readonly number[],
    startPosition: number,
    tokens: readonly number[],
    sample: boolean,
  ): StepRequest {
    const record = request.stepRecord;
    if (record === null) {
      return (request.stepRecord = new StepRequest(request.id, blockIds, newBlockIds, startPosition, tokens, sample, request.seed));
    }
    record.blockIds = blockIds;
    record.newBlockIds = newBlockIds;
    record.startPosition = startPosition;
    record.tokens = tokens;
    record.sample = sample;
    return record;
  }
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

/**
 * A token sampled for a request that keeps running. Each request keeps one
 * (`Request.tokenUpdate`), refilled by every step that samples it: an
 * update is valid until the next updateFromOutput().
 */
export class SampledTokenUpdate {
  newTokenIds: readonly number[];
  /** The token as a number (RequestTokens.token): delivery reads it without touching the shared array. */
  token: number;

  constructor(
    readonly reqId: string,
    token: number,
    readonly owner: unknown,
  ) {
    this.newTokenIds = singleToken(token);
    this.token = token;
  }

  /** The request's update for this step: its own, refilled, or a new one the first time. */
  static of(request: Request, token: number): SampledTokenUpdate {
    const update = request.tokenUpdate;
    if (update === null) return (request.tokenUpdate = new SampledTokenUpdate(request.id, token, request.owner));
    update.newTokenIds = singleToken(token);
    update.token = token;
    return update;
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
