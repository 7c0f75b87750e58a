import { describe, expect, it } from 'vitest';
import { expectCorrectOutputs, expectIdle, runUntilStopped, withFailingEngine } from './helpers.js';
import { DEATH_CONFIG, deathWorkload, positions, RANK_DEATHS, WALL_BOUND_MS } from './rank-deaths.js';

/**
 * Rank death with rankRestart (docs/architecture.md, "Failure recovery"): the dead rank is
 * respawned, every rank and the scheduler drop what the lost rank held, and
 * requests resume by recompute with outputs unchanged.
 */
describe.each(RANK_DEATHS)('a rank that $name, with rankRestart', (death) => {
  it.each(positions(death))('rank %i of 4: the run completes with exact outputs on a fresh rank', async (rank) => {
    await withFailingEngine({ ...DEATH_CONFIG, rankRestart: true, faults: death.fault(rank) }, async (engine) => {
      const run = await runUntilStopped(engine, deathWorkload());
      expect(run.stopped).toBeNull();
      expectCorrectOutputs(run.finished, 16);
      expect(run.finished).toHaveLength(16);
      expect(run.wallMs).toBeLessThan(WALL_BOUND_MS);
      expect(engine.metrics().rankRestarts).toBe(1);
      await expectIdle(engine);
      // The dead (or hung) thread is gone; only the four current ranks run.
      expect(engine.liveRankThreads()).toBe(4);
      await engine.shutdown();
      expect(engine.liveRankThreads()).toBe(0);
    });
  });
});
