import { describe, expect, it } from 'vitest';
import type { EngineOptions } from '../../src/runtime/engine.js';
import { evictThenReuse, idleUntilStep, runWaves, SMALL_GPU, stepUntilRestarted, withFailingEngine } from './helpers.js';
import { probe, withSwitches } from '../../src/testing/index.js';

/**
 * Two steps of rank-loss recovery, each switched off in turn: the reset must
 * wait until every device finished the jobs of the lost state (else they land
 * on blocks the new state reuses), and the aggregator must forget partial
 * reports (else they count toward the new state's jobs and requests).
 */
describe('rank-loss recovery with a step of it switched off (sensitivity)', () => {
  /**
   * Rank 1 dies two steps into a wave of loads while rank 0 runs every job
   * 1.5 s late (far longer than respawning a rank takes): at the crash rank 0
   * still runs loads of the lost state, and rank 1 has reported loads rank 0
   * has not. The run is cut short after the recovery (every later job would
   * be as slow).
   */
  async function stateAfterRecovery(options: EngineOptions): Promise<{ deviceJobs: number[]; partialJobs: number }> {
    const [computed, again] = evictThenReuse(8);
    const faults = 'delay:rank=0,ms=1500,after=200;crash:rank=1,step=202';
    return withFailingEngine(
      { ...SMALL_GPU, tp: 2, rankRestart: true, faults, stepDeadlineMs: 10_000 },
      async (engine) => {
        await runWaves(engine, [computed]);
        await idleUntilStep(engine, 200);
        await engine.addRequests(again);
        await stepUntilRestarted(engine, []);
        return {
          deviceJobs: (await probe(engine).rankStates()).map((s) => s.deviceJobs),
          partialJobs: probe(engine).holdings().partialJobs,
        };
      },
      options,
    );
  }

  it('as built, the reset drains every device and forgets every partial report', async () => {
    expect(await stateAfterRecovery({})).toEqual({ deviceJobs: [0, 0], partialJobs: 0 });
  });

  it('a reset that does not drain leaves jobs of the lost state running on the device, free to land on reused blocks', async () => {
    const state = await stateAfterRecovery(withSwitches({ worker: { resetWithoutDrain: true } }));
    expect(state.deviceJobs[0]).toBeGreaterThan(0);
  });

  it('an aggregator that is not reset keeps counting reports of the lost state', async () => {
    const state = await stateAfterRecovery(withSwitches({ engine: { keepPartialReportsOnRankLoss: true } }));
    expect(state.partialJobs).toBeGreaterThan(0);
  });
});
