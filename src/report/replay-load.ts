import { summarizePercentiles } from './percentiles.js';

/**
 * How loaded a replay ran, so a reader knows which regime its figures come
 * from: the replay's span against the trace's, how long requests queued, and
 * the latencies on the replay's clock.
 */
export interface ReplayLoad {
  /** The clock the replay kept (describeReplayClock). */
  readonly clock: string;
  /** First to last arrival in the trace, in ms. */
  readonly traceSpanMs: number;
  /** First arrival to last finish in the replay, in ms. */
  readonly replaySpanMs: number;
  /** replaySpanMs / traceSpanMs (1 for a trace whose requests all arrive at once). */
  readonly paceRatio: number;
  /** Arrival to first scheduled, in ms. */
  readonly meanQueueWaitMs: number;
  readonly p99QueueWaitMs: number;
  readonly ttftP50Ms: number;
  readonly ttftP90Ms: number;
  readonly ttftP99Ms: number;
  /** Output tokens over the replay span. */
  readonly outputTokensPerSecond: number;
  readonly preemptions: number;
}

/** Past this pace ratio the replay is slower than the trace, and a report says what that means. */
export const SLOW_REPLAY_RATIO = 1.25;

/** One finished request's times on the replay's clock (ms). */
export interface ReplayedRequestTimes {
  readonly arrivalMs: number;
  readonly firstScheduledMs: number;
  readonly firstTokenMs: number;
  readonly finishMs: number;
  readonly outputTokens: number;
}

export function summarizeReplayLoad(clock: string, requests: readonly ReplayedRequestTimes[], preemptions: number): ReplayLoad {
  if (requests.length === 0) {
    return { clock, traceSpanMs: 0, replaySpanMs: 0, paceRatio: 1, meanQueueWaitMs: 0, p99QueueWaitMs: 0, ttftP50Ms: 0, ttftP90Ms: 0, ttftP99Ms: 0, outputTokensPerSecond: 0, preemptions };
  }
  let first = Infinity;
  let lastArrival = -Infinity;
  let lastFinish = -Infinity;
  let outputTokens = 0;
  let waitSum = 0;
  const waits: number[] = [];
  const ttfts: number[] = [];
  for (const r of requests) {
    first = Math.min(first, r.arrivalMs);
    lastArrival = Math.max(lastArrival, r.arrivalMs);
    lastFinish = Math.max(lastFinish, r.finishMs);
    outputTokens += r.outputTokens;
    const wait = r.firstScheduledMs - r.arrivalMs;
    waitSum += wait;
    waits.push(wait);
    ttfts.push(r.firstTokenMs - r.arrivalMs);
  }
  const traceSpanMs = lastArrival - first;
  const replaySpanMs = lastFinish - first;
  const ttft = summarizePercentiles(ttfts);
  return {
    clock,
    traceSpanMs,
    replaySpanMs,
    paceRatio: traceSpanMs > 0 ? replaySpanMs / traceSpanMs : 1,
    meanQueueWaitMs: waitSum / requests.length,
    p99QueueWaitMs: summarizePercentiles(waits).p99 ?? 0,
    ttftP50Ms: ttft.p50 ?? 0,
    ttftP90Ms: ttft.p90 ?? 0,
    ttftP99Ms: ttft.p99 ?? 0,
    outputTokensPerSecond: replaySpanMs > 0 ? (outputTokens * 1000) / replaySpanMs : 0,
    preemptions,
  };
}

/** The warning a report prints for a replay slower than its trace, or null. */
export function slowReplayWarning(load: ReplayLoad): string | null {
  if (load.paceRatio <= SLOW_REPLAY_RATIO) return null;
  return (
    `the replay ran ${load.paceRatio.toFixed(2)}x slower than the trace (mean queue wait ${(load.meanQueueWaitMs / 1000).toFixed(1)} s): ` +
    'requests queue far longer than a service sized for this load would let them, and queue-aware policies see requests a real service would not have yet'
  );
}
