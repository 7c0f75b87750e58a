import type { DeviceFaults } from '../device/types.js';
import { mix } from '../model/mix.js';
import type { FaultRule } from './plan.js';

export type RankDeath = { kind: 'crash'; how: 'throw' | 'exit' } | { kind: 'hang' };

/** A moment a death rule can name (see plan.ts). */
type DeathMoment = 'step' | 'open' | 'reset';

/**
 * Turns one rank's fault rules into what its device injects at each step,
 * and tells the rank when it must die.
 */
export class RankFaults {
  private appliedKey = '';
  private loadFailuresSoFar = 0;

  /**
   * `loadFailuresBefore`: block load failures an earlier incarnation of this
   * rank already injected (a restarted rank keeps spending the same `count`).
   */
  constructor(
    private readonly rules: readonly FaultRule[],
    private readonly seed: number,
    private readonly rank: number,
    loadFailuresBefore = 0,
  ) {
    this.loadFailuresSoFar = loadFailuresBefore;
  }

  /** Records block load failures seen on this rank (they count against `count`). */
  noteLoadFailures(blocks: number): void {
    this.loadFailuresSoFar += blocks;
  }

  /** How the rank dies at `step`, if a rule says so. */
  deathAt(step: number): RankDeath | null {
    return this.death('step', step);
  }

  /** How the rank dies right after opening its device for the `count`-th time (1 = at engine start). */
  deathAtOpen(count: number): RankDeath | null {
    return this.death('open', count);
  }

  /** How the rank dies during the engine's `count`-th rank-loss reset (1 = the first). */
  deathAtReset(count: number): RankDeath | null {
    return this.death('reset', count);
  }

  private death(moment: DeathMoment, value: number): RankDeath | null {
    for (const rule of this.rules) {
      if (rule.kind !== 'crash' && rule.kind !== 'hang') continue;
      if (rule[moment] !== value) continue;
      return rule.kind === 'crash' ? { kind: 'crash', how: rule.how } : { kind: 'hang' };
    }
    return null;
  }

  /** Whether a `stall` rule targets this rank (its device must be able to hold transfers back). */
  get stalls(): boolean {
    return this.rules.some((r) => r.kind === 'stall');
  }

  /**
   * The device faults active at `step`, or null when they are unchanged since
   * the last call (so the device's fault RNG is not reseeded every step).
   */
  deviceFaultsAt(step: number): DeviceFaults | null {
    const active = this.rules.filter(
      (r) =>
        (r.kind === 'load-fail' || r.kind === 'store-fail' || r.kind === 'delay' || r.kind === 'stall') &&
        r.after <= step,
    );
    const key = active.map((r) => this.rules.indexOf(r)).join(',');
    if (key === this.appliedKey) return null;
    this.appliedKey = key;

    const blocks = new Set<number>();
    let loadKeep = 1;
    let storeKeep = 1;
    let delayMs = 0;
    let stall: { steps: number | null } | null = null;
    let limit: number | null = 0;
    for (const rule of active) {
      if (rule.kind === 'load-fail') {
        for (const b of rule.blocks) blocks.add(b);
        loadKeep *= 1 - rule.p;
        limit = limit === null || rule.count === null ? null : limit + rule.count;
      } else if (rule.kind === 'store-fail') {
        storeKeep *= 1 - rule.p;
      } else if (rule.kind === 'delay') {
        delayMs = Math.max(delayMs, rule.ms);
      } else if (rule.kind === 'stall') {
        // Two stalls: the longer hold wins (null, until needed, is the longest).
        const steps: number | null = stall === null ? rule.steps : stall.steps === null || rule.steps === null ? null : Math.max(stall.steps, rule.steps);
        stall = { steps };
      }
    }
    const hasLoadRule = active.some((r) => r.kind === 'load-fail');
    return {
      loadFailBlocks: [...blocks],
      loadFailProbability: 1 - loadKeep,
      loadFailLimit: !hasLoadRule ? 0 : limit === null ? undefined : Math.max(0, limit - this.loadFailuresSoFar),
      storeFailProbability: 1 - storeKeep,
      delayMs,
      ...(stall ? { stall } : {}),
      seed: mix((this.seed ^ Math.imul(this.rank + 1, 0x9e3779b9) ^ Math.imul(step + 1, 0x85ebca6b)) >>> 0),
    };
  }
}
