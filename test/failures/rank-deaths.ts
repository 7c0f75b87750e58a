import type { RequestSpec } from '../../src/runtime/engine-types.js';
import { evictThenReuse, SMALL_GPU } from './helpers.js';

/**
 * The ways a rank dies, at a step in the middle of a run that offloads,
 * reloads and preempts, and what the engine must say about each.
 */

/** A short step deadline, so a hung rank is caught quickly. */
export const STEP_DEADLINE_MS = 1500;
/**
 * Bound on the wall time of a run that loses a rank: the deadline plus a
 * generous allowance for the rest of the run and respawning threads on a
 * loaded machine. It catches a hang, not a slow run.
 */
export const WALL_BOUND_MS = STEP_DEADLINE_MS + 15_000;

/** The step at which the rank dies: mid-run, with transfers in flight. */
export const DEATH_STEP = 30;

export interface RankDeath {
  readonly name: string;
  readonly fault: (rank: number) => string;
  /** What the engine's error says caused it. */
  readonly cause: RegExp;
  /** The middle rank of tp = 4 this kind is tried on (the others: first and last). */
  readonly middleRank: number;
}

export const RANK_DEATHS: readonly RankDeath[] = [
  {
    name: 'throws an uncaught error',
    fault: (rank) => `crash:rank=${rank},step=${DEATH_STEP}`,
    cause: new RegExp(`uncaught error: injected crash at step ${DEATH_STEP}`),
    middleRank: 1,
  },
  {
    name: 'exits its thread',
    fault: (rank) => `crash:rank=${rank},step=${DEATH_STEP},how=exit`,
    cause: /worker thread exited with code 70/,
    middleRank: 2,
  },
  {
    name: 'hangs',
    fault: (rank) => `hang:rank=${rank},step=${DEATH_STEP}`,
    cause: new RegExp(`missed the step deadline of ${STEP_DEADLINE_MS} ms at step ${DEATH_STEP}`),
    middleRank: 1,
  },
];

/** First, middle and last rank of tp = 4 for one kind of death. */
export function positions(death: RankDeath): number[] {
  return [0, death.middleRank, 3];
}

export const DEATH_CONFIG = { ...SMALL_GPU, tp: 4, maxNumSeqs: 3, stepDeadlineMs: STEP_DEADLINE_MS } as const;

/** The run a rank dies in: sixteen requests that store, get evicted, reload and preempt. */
export function deathWorkload(): RequestSpec[][] {
  return evictThenReuse(12);
}
