import type { RankDeviceSpans, RankStepOutput } from '../protocol/step-protocol.js';
import type { StepObserver } from './step-observer.js';

/** One rank's device spans of one step, as the rank reported them. */
export interface RecordedDeviceSpans extends RankDeviceSpans {
  readonly rank: number;
  readonly step: number;
}

const IGNORE = (): void => undefined;

/**
 * Keeps every rank's device spans (RankStepOutput.deviceSpans) as each rank
 * reported them, before and apart from the merge of the ranks' outputs, so
 * each rank's own timing of a job shared by all ranks is kept. Made only
 * when the engine traces its devices: a normal run keeps nothing.
 */
export class DeviceSpanRecorder implements StepObserver {
  private readonly recorded: RecordedDeviceSpans[] = [];

  stepScheduled = IGNORE;
  stepFinished = IGNORE;
  transfersDropped = IGNORE;

  stepAnswered(outputs: readonly RankStepOutput[]): void {
    for (const out of outputs) {
      const spans = out.deviceSpans;
      if (spans === undefined || (spans.forward === null && spans.copyJobs.length === 0)) continue;
      this.recorded.push({ rank: out.rank, step: out.step, ...spans });
    }
  }

  /** Everything recorded so far, in the order the steps were answered (ranks in rank order within a step). */
  spans(): readonly RecordedDeviceSpans[] {
    return this.recorded;
  }
}
