import type { EngineEventLog } from '../log/engine-events.js';
import type { EngineMonitor } from '../metrics/engine-monitor.js';
import type { ModelRunnerOutput, RankStepOutput, SchedulerOutput } from '../protocol/step-protocol.js';
import type { TransferMetrics } from '../metrics/transfer-metrics.js';

/**
 * What one engine step tells whoever watches it, in the order it happens.
 * The engine reports a step through one observer; the assembly fans it out
 * to the metrics, the monitoring histograms and the event log.
 */
export interface StepObserver {
  /** The scheduler built the step: its transfer jobs are in flight from now on. */
  stepScheduled(scheduled: SchedulerOutput): void;
  /** Every rank answered; `merged` is their aggregated output. */
  stepAnswered(outputs: readonly RankStepOutput[], merged: ModelRunnerOutput): void;
  /** The scheduler applied the step, which took `wallMs` milliseconds end to end. */
  stepFinished(step: number, wallMs: number, outputs: readonly RankStepOutput[]): void;
  /** Every rank dropped its transfers (rank-loss reset or engine stop). */
  transfersDropped(): void;
}

/** Calls every observer in turn, in the order given. */
export class StepObservers implements StepObserver {
  constructor(private readonly observers: readonly StepObserver[]) {}

  stepScheduled(scheduled: SchedulerOutput): void {
    for (const o of this.observers) o.stepScheduled(scheduled);
  }

  stepAnswered(outputs: readonly RankStepOutput[], merged: ModelRunnerOutput): void {
    for (const o of this.observers) o.stepAnswered(outputs, merged);
  }

  stepFinished(step: number, wallMs: number, outputs: readonly RankStepOutput[]): void {
    for (const o of this.observers) o.stepFinished(step, wallMs, outputs);
  }

  transfersDropped(): void {
    for (const o of this.observers) o.transfersDropped();
  }
}

const IGNORE = (): void => undefined;

/** The transfer totals of metrics(): every job the ranks finished. */
export function transferTotalsObserver(transfers: TransferMetrics): StepObserver {
  return {
    stepScheduled: IGNORE,
    stepAnswered: (outputs, merged) => {
      transfers.record(merged.finishedJobs);
      transfers.recordCopyJobs(outputs);
    },
    stepFinished: IGNORE,
    transfersDropped: IGNORE,
  };
}

/** The monitoring histograms and in-flight gauges. */
export function monitorObserver(monitor: EngineMonitor): StepObserver {
  return {
    stepScheduled: (scheduled) => monitor.stepScheduled(scheduled),
    stepAnswered: (outputs, merged) => monitor.stepAnswered(outputs, merged.finishedJobs),
    stepFinished: (_step, wallMs) => monitor.stepFinished(wallMs),
    transfersDropped: () => monitor.transfersDropped(),
  };
}

/** The event log: fault-plan activations, first injected failures, slow steps. */
export function eventLogObserver(events: EngineEventLog): StepObserver {
  return {
    stepScheduled: IGNORE,
    stepAnswered: IGNORE,
    stepFinished: (step, wallMs, outputs) => events.stepFinished(step, wallMs, outputs),
    transfersDropped: IGNORE,
  };
}
