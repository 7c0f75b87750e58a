import type { FaultRule } from '../faults/plan.js';
import { mix } from '../model/mix.js';
import type { RemoteJobFailure } from '../protocol/remote-jobs.js';

type RemoteFailRule = Extract<FaultRule, { kind: 'remote-fail' }>;
type RemoteDownRule = Extract<FaultRule, { kind: 'remote-down' }>;

/**
 * The remote tier's injected faults (`remote-fail`, `remote-down` in a fault
 * plan) for one rank, or for the scheduler side (rank null: only
 * `remote-down` applies there, whatever rank it names). Decisions are a
 * deterministic function of the plan's seed, the rank and the job, so a
 * seed replays the same run.
 */
export class RemoteFaults {
  private readonly fails: RemoteFailRule[];
  private readonly downs: RemoteDownRule[];
  injected = 0;

  constructor(
    rules: readonly FaultRule[],
    private readonly seed: number,
    private readonly rank: number | null,
  ) {
    const mine = (r: FaultRule) => rank === null || r.rank === '*' || r.rank === rank;
    this.fails = rules.filter((r): r is RemoteFailRule => r.kind === 'remote-fail' && mine(r));
    // The scheduler side sees the server down whichever rank a rule names.
    this.downs = rules.filter((r): r is RemoteDownRule => r.kind === 'remote-down' && mine(r));
  }

  get empty(): boolean {
    return this.fails.length === 0 && this.downs.length === 0;
  }

  /** Whether the remote counts as unreachable at `step`. */
  downAt(step: number): boolean {
    return this.downs.some((r) => step >= r.step && (r.steps === null || step < r.step + r.steps));
  }

  /**
   * The injected failure of job `jobId` tried at `step`, or null. `attempt`
   * counts its retries (0: the first try); each try is rolled on its own, so
   * a write that failed may land when tried again.
   */
  failureAt(step: number, jobId: number, attempt = 0): RemoteJobFailure | null {
    if (this.downAt(step)) {
      this.injected++;
      return 'connection';
    }
    if (this.rank === null) return null;
    for (const [i, rule] of this.fails.entries()) {
      if (step < rule.after) continue;
      const roll = mix(
        (this.seed ^ Math.imul(this.rank + 1, 0x9e3779b9) ^ Math.imul(jobId, 0x85ebca6b) ^ Math.imul(i + 1, 0xc2b2ae35) ^ Math.imul(attempt, 0x27d4eb2f)) >>> 0,
      );
      if (roll / 2 ** 32 < rule.p) {
        this.injected++;
        return 'injected';
      }
    }
    return null;
  }
}
