import { setTimeout as sleep } from 'node:timers/promises';
import { EngineStoppedError, type Engine } from '../runtime/engine.js';
import type { FinishedRequest } from '../runtime/engine-types.js';
import { MAX_TIMER_MS } from '../config/limits.js';
import type { Workload } from './workload.js';

/** Requests added per loop turn at most, so a burst of arrivals does not starve stepping. */
const MAX_ADDS_PER_TURN = 4096;

export interface DriveResult {
  /** From the first arrival to the last finish. */
  readonly wallSeconds: number;
  /** Set when a rank died and the engine stopped; its failed requests were passed to onFinished. */
  readonly stopped: EngineStoppedError | null;
}

/**
 * Feeds a workload into an engine by arrival time (each request keeps its
 * arrival for TTFT), steps while there is work, sleeps until the next arrival
 * when idle, and tells the workload about every finished request (closed
 * loops create follow-ups from them).
 */
export async function driveWorkload(
  engine: Engine,
  workload: Workload,
  onFinished: (finished: FinishedRequest) => void,
): Promise<DriveResult> {
  const start = engine.now();
  const runClock = (): number => engine.now() - start;
  const done = (f: FinishedRequest): void => {
    onFinished(f);
    workload.onFinished(f, runClock());
  };
  let stopped: EngineStoppedError | null = null;
  try {
    for (;;) {
      const due = workload.takeDue(runClock(), MAX_ADDS_PER_TURN);
      if (due.length > 0) await engine.addRequests(due.map((d) => ({ ...d.spec, arrivalMs: start + d.arrivalMs })));
      if (engine.hasPendingWork()) {
        (await engine.step()).finished.forEach(done);
        continue;
      }
      const next = workload.nextArrivalMs();
      if (workload.done() || next === null) break;
      // Timers cap at about 24.8 days (a longer wait would fire at once and spin); wait in slices up to it.
      await sleep(Math.min(MAX_TIMER_MS, Math.max(0, next - runClock())));
    }
  } catch (error) {
    if (!(error instanceof EngineStoppedError)) throw error;
    error.finished.forEach(done);
    stopped = error;
  }
  return { wallSeconds: runClock() / 1000, stopped };
}
