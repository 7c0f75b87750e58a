import type { ModelRunnerOutput, SchedulerOutput } from '../protocol/step-protocol.js';
import type { RequestUpdate, Scheduler } from '../scheduler/scheduler.js';
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
  ) {}

  async step(): Promise<SimulatedStep> {
    const scheduled = this.scheduler.schedule();
    const output = await this.ranks.execute(scheduled);
    const updates = this.scheduler.updateFromOutput(scheduled, output);
    return { scheduled, output, updates };
  }

  /**
   * Every rank was lost: the ranks restart with fresh devices and the
   * scheduler drops everything they held, as the engine's recovery does.
   */
  async loseRanks(): Promise<void> {
    await this.ranks.restart();
    this.scheduler.resetForRankLoss();
  }
}
