import type { RankStepOutput } from '../protocol/step-protocol.js';

/** What a rank's fault rules need to know of the rank's earlier devices when it opens a new one. */
export interface RankFaultHistory {
  /** How many times the rank has opened a device, this time included (1 at engine start, 2 after a restart, ...). */
  readonly openCount: number;
  /** Block load failures its earlier devices injected (they count against a rule's `count`). */
  readonly loadFailuresBefore: number;
}

/**
 * The fault plan's accounting across rank restarts, kept on the main thread:
 * a restarted rank gets a fresh thread and device, yet its `open N` deaths
 * count every open so far, and its load failures keep spending the same
 * `count`. The executor records every step answer and every device open
 * here.
 */
export class RankFaultLedger {
  private readonly opens: number[];
  private readonly loadFailures: number[];

  constructor(tp: number) {
    this.opens = new Array<number>(tp).fill(0);
    this.loadFailures = new Array<number>(tp).fill(0);
  }

  /** Counts one more device open of `rank`; returns the history its new device starts from. */
  deviceOpened(rank: number): RankFaultHistory {
    this.opens[rank] += 1;
    return { openCount: this.opens[rank], loadFailuresBefore: this.loadFailures[rank] };
  }

  /** Counts the block load failures a rank reported in one step. */
  stepAnswered(output: RankStepOutput): void {
    for (const job of output.connector.finishedJobs) this.loadFailures[output.rank] += job.failedGpuBlockIds.length;
  }
}

/**
 * Tells, on one rank, which failed load blocks the fault plan injected: the
 * device counts injected failures (possibly before their job is reported),
 * so injections not yet matched to a failed job carry over to the next one;
 * failed blocks beyond the injections are real device errors.
 */
export class InjectedLoadFailures {
  private seen = 0;
  private unclaimed = 0;

  /** Of `failedBlocks` reported now, how many were injected, given the device's running count of injections. */
  claim(injectedTotal: number, failedBlocks: number): number {
    this.unclaimed += injectedTotal - this.seen;
    this.seen = injectedTotal;
    const injected = Math.min(failedBlocks, this.unclaimed);
    this.unclaimed -= injected;
    return injected;
  }
}
