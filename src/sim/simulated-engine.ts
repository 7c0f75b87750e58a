import { performance } from 'node:perf_hooks';
import type { ModelRunnerOutput, SchedulerOutput } from '../protocol/step-protocol.js';
import type { RequestUpdate, Scheduler } from '../scheduler/scheduler.js';
import type { StepObserver } from '../runtime/step-observer.js';
import type { SimulatedRanks } from './simulated-ranks.js';

/**
 * One step of the loop: what was scheduled, the merged output, and what it
 * changed for requests. The scheduler refills its step records and updates
 * in place, so `scheduled.requests` and `updates` are valid until the next
 * step; a caller that keeps them copies them.
 */
export interface SimulatedStep {
  readonly scheduled: SchedulerOutput;
  readonly output: ModelRunnerOutput;
  readonly updates: RequestUpdate[];
}

/**
 * The engine loop in one thread: schedule, run the step on the ranks
 * (production RankWorkers over simulated devices, outputs merged by the
 * production aggregator), then update the scheduler. Tests and the policy
 * sweep drive it step by step.
 */
export class SimulatedEngine {
  constructor(
    readonly scheduler: Scheduler,
    readonly ranks: SimulatedRanks,
    /** Told about every step, as the engine tells its observer; none by default. */
    private readonly observer: StepObserver | null = null,
  ) {}

  async step(): Promise<SimulatedStep> {
    const started = performance.now();
    const scheduled = this.scheduler.schedule();
    this.observer?.stepScheduled(scheduled);
    const output = await this.ranks.execute(scheduled);
    this.observer?.stepAnswered(this.ranks.rankOutputs, output);
    const updates = this.scheduler.updateFromOutput(scheduled, output);
    this.observer?.stepFinished(scheduled.step, performance.now() - started, this.ranks.rankOutputs);
    return { scheduled, output, updates };
  }

  /**
   * Every rank was lost: the ranks restart with fresh devices and the
   * scheduler drops everything they held, as the engine's recovery does.
   */
  async loseRanks(): Promise<void> {
    await this.ranks.restart();
    this.scheduler.resetForRankLoss();
    this.observer?.transfersDropped();
  }
}
