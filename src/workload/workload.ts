import type { FinishedRequest, RequestSpec } from '../runtime/engine-types.js';

/** A request with the id it will carry in the engine. */
export type WorkloadRequestSpec = RequestSpec & { readonly id: string };

/** A request and the time (ms on the run's clock, 0 = run start) it arrives. */
export interface ArrivingRequest {
  readonly arrivalMs: number;
  readonly spec: WorkloadRequestSpec;
}

/**
 * A source of requests for `kvtier run`. Open-loop workloads (a trace) know
 * every arrival up front; closed-loop ones (multi-turn chat) create the next
 * request when an earlier one finishes. The runner pulls what is due:
 *
 *   for each step: add workload.takeDue(now) to the engine; step; pass every
 *   finished request to workload.onFinished(f, now); stop once
 *   workload.done() and the engine is idle; when idle and nothing is due,
 *   wait until workload.nextArrivalMs().
 *
 * Pulling (rather than handing over every request at once) lets a trace build
 * each prompt only when it arrives, so long traces never sit in memory whole.
 */
export interface Workload {
  /** One line describing the workload, for reports. */
  readonly description: string;
  /** Requests the workload plans to issue (a closed loop may end early). */
  readonly plannedRequests: number;
  /** Requests whose arrival time is <= nowMs, in arrival order, at most `limit`. */
  takeDue(nowMs: number, limit?: number): ArrivingRequest[];
  /** Arrival time of the earliest pending request, or null when none is pending. */
  nextArrivalMs(): number | null;
  /** Tells the workload a request finished (closed loops schedule follow-ups). */
  onFinished(finished: FinishedRequest, nowMs: number): void;
  /** True once no request is pending and none will be created. */
  done(): boolean;
}
