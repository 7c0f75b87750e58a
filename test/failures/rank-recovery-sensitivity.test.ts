import { describe, expect, it } from 'vitest';
import type { EngineOptions } from '../../src/runtime/engine.js';
import {
  evictThenReuse,
  idleUntilStep,
  runWaves,
  SMALL_GPU,
  stepUntilPartiallyReported,
  withFailingEngine,
} from './helpers.js';
import { probe, withSwitches } from '../../src/testing/index.js';

/**
 * Two steps of rank-loss recovery, each switched off in turn: the reset must
 * wait until every device finished the jobs of the lost state (else they land
 * on blocks the new state reuses), and the aggregator must forget partial
 * reports (else they count toward the new state's jobs and requests).
 */
describe('rank-loss recovery with a step of it switched off (sensitivity)', () => {
  /**
   * Rank 0 stalls every transfer from step 200 on (it starts one only when
   * something needs it), so the wave of loads that follows runs on rank 1
   * alone. Once rank 1 has reported a load rank 0 has not (the aggregator
   * holds a partial report), rank 1 dies: at that moment rank 0 still holds
   * loads of the lost state, and rank 1 has reported loads rank 0 has not.
   * The order comes from what the test observes, not from how fast anything
   * runs. The run is cut short after the recovery.
   */
  async function stateAfterRecovery(options: EngineOptions): Promise<{ deviceJobs: number[]; partialJobs: number }> {
    const [computed, again] = evictThenReuse(8);
    return withFailingEngine(
      { ...SMALL_GPU, tp: 2, rankRestart: true, faults: 'stall:rank=0,after=200', stepDeadlineMs: 10_000 },
      async (engine) => {
        await runWaves(engine, [computed]);
        await idleUntilStep(engine, 200);
        await engine.addRequests(again);
        await stepUntilPartiallyReported(engine);
        await probe(engine).killRank(1);
        // The next step finds rank 1 dead and recovers.
        await engine.step();
        expect(engine.metrics().rankRestarts).toBe(1);
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
