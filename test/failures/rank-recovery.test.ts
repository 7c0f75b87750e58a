import { describe, expect, it } from 'vitest';
import { RankError } from '../../src/core/errors.js';
import { Engine, EngineStoppedError } from '../../src/runtime/engine.js';
import type { EngineConfigInput, FinishedRequest } from '../../src/runtime/engine-types.js';
import {
  evictThenReuse,
  expectCorrectOutputs,
  expectEverythingForgotten,
  expectIdle,
  idleUntilStep,
  runUntilStopped,
  runWaves,
  SMALL_GPU,
  withFailingEngine,
} from './helpers.js';
import { DEATH_CONFIG, deathWorkload, WALL_BOUND_MS } from './rank-deaths.js';
import { probe, type RankState } from '../../src/testing/index.js';

/**
 * What a rank restart must leave behind: the restarted rank, the other ranks
 * and the scheduler agree that the lost rank's GPU blocks and CPU tier are
 * gone, and the recovery itself survives ranks dying while it runs.
 */

/** Steps until rank `rank` holds device jobs between steps; the states seen then. */
async function stepUntilRankHoldsJobs(engine: Engine, rank: number, finished: FinishedRequest[]): Promise<RankState[]> {
  for (;;) {
    const states = await probe(engine).rankStates();
    if (states[rank].deviceJobs > 0) return states;
    expect(engine.hasPendingWork()).toBe(true);
    finished.push(...(await engine.step()).finished);
  }
}

async function finishRun(engine: Engine, finished: FinishedRequest[]): Promise<void> {
  while (engine.hasPendingWork()) finished.push(...(await engine.step()).finished);
}

describe('after a rank restart, every rank and the scheduler agree that nothing survived', () => {
  it('a rank lost at an idle step takes the whole CPU tier and GPU prefix cache with it; the same prompts are computed afresh', async () => {
    const [computed, again] = evictThenReuse();
    await withFailingEngine({ ...SMALL_GPU, tp: 4, rankRestart: true, faults: 'crash:rank=2,step=200' }, async (engine) => {
      const finished = await runWaves(engine, [computed]);
      const before = probe(engine).holdings();
      expect(before.cpuTier!.readyBlocks).toBeGreaterThan(0);
      expect(before.gpu.cached).toBeGreaterThan(0);

      await idleUntilStep(engine, 200);
      await engine.step();
      expect(engine.metrics().rankRestarts).toBe(1);
      await expectEverythingForgotten(engine);

      const afterLoss = await runWaves(engine, [again]);
      for (const f of afterLoss) expect({ gpu: f.gpuPrefixHitTokens, cpu: f.cpuTierHitTokens }).toEqual({ gpu: 0, cpu: 0 });
      expectCorrectOutputs([...finished, ...afterLoss], 16);
      await expectIdle(engine);
    });
  });

  it('a rank lost while another rank has slow transfers in flight: the reset waits for them, then all is forgotten', async () => {
    // Rank 0's transfers are slow (50 ms each) and, from step 30, held for 12 steps, so some step boundary finds it
    // holding some however fast the steps run; rank 1 dies at the first such boundary the test sees.
    await withFailingEngine({ ...SMALL_GPU, tp: 2, rankRestart: true, faults: 'delay:rank=0,ms=50;stall:rank=0,after=30,steps=12' }, async (engine) => {
      await engine.addRequests(evictThenReuse(8).flat());
      const finished: FinishedRequest[] = [];
      const beforeLoss = await stepUntilRankHoldsJobs(engine, 0, finished);
      expect(beforeLoss[0].deviceJobs).toBeGreaterThan(0);
      await probe(engine).killRank(1);
      await engine.step();
      expect(engine.metrics().rankRestarts).toBe(1);
      await expectEverythingForgotten(engine);
      await finishRun(engine, finished);
      expectCorrectOutputs(finished, 16);
      expect(finished).toHaveLength(16);
      await expectIdle(engine);
    });
  });

  it('a restarted rank keeps spending its load-fail count instead of starting over', async () => {
    const [computed, again] = evictThenReuse();
    const faults = 'load-fail:rank=1,p=1,count=2;crash:rank=1,step=300';
    await withFailingEngine({ ...SMALL_GPU, tp: 2, rankRestart: true, faults }, async (engine) => {
      const finished = await runWaves(engine, [computed, again]);
      expect((await probe(engine).faultStats())[1].loadBlocksFailed).toBe(2);
      await idleUntilStep(engine, 301);
      expect(engine.metrics().rankRestarts).toBe(1);
      const loadsBefore = engine.metrics().transfers.cpuToGpu.jobs;
      finished.push(...(await runWaves(engine, [computed.map((r) => ({ ...r, id: `third-${r.id}` })), again.map((r) => ({ ...r, id: `fourth-${r.id}` }))])));
      expect(engine.metrics().transfers.cpuToGpu.jobs).toBeGreaterThan(loadsBefore);
      // The fresh device of rank 1 injected nothing: the budget was spent before the restart.
      expect((await probe(engine).faultStats())[1].loadBlocksFailed).toBe(0);
      expectCorrectOutputs(finished, 32);
      await expectIdle(engine);
    });
  });
});

describe('ranks dying while the engine recovers', () => {
  const config: EngineConfigInput = { ...DEATH_CONFIG, rankRestart: true };

  /** Runs through the faults; `openCounts` says how many devices each rank opened in the end. */
  async function expectRecovered(faults: string, openCounts: number[]): Promise<void> {
    await withFailingEngine({ ...config, faults }, async (engine) => {
      const run = await runUntilStopped(engine, deathWorkload());
      expect(run.stopped).toBeNull();
      expectCorrectOutputs(run.finished, 16);
      expect(run.wallMs).toBeLessThan(WALL_BOUND_MS);
      expect(engine.metrics().rankRestarts).toBe(1);
      await expectIdle(engine);
      expect(engine.liveRankThreads()).toBe(4);
      expect(engine.ranks.map((r) => r.openCount)).toEqual(openCounts);
    });
  }

  it('a rank that crashes during the reset is restarted too, and the reset is redone', async () => {
    await expectRecovered('crash:rank=2,step=30;crash:rank=0,reset=1', [2, 1, 2, 1]);
  });

  it('a rank that exits its thread during the reset is restarted too', async () => {
    await expectRecovered('crash:rank=2,step=30;crash:rank=3,reset=1,how=exit', [1, 1, 2, 2]);
  });

  it('a rank that hangs during the reset misses the deadline and is restarted', async () => {
    await expectRecovered('crash:rank=2,step=30;hang:rank=1,reset=1', [1, 2, 2, 1]);
  });

  it('the restarted rank dying right after it opened its new device is restarted once more', async () => {
    await expectRecovered('crash:rank=1,step=30;crash:rank=1,open=2', [1, 3, 1, 1]);
  });

  it('a rank that dies at every restart stops the engine after three rounds, naming it', async () => {
    const faults = 'crash:rank=1,step=30;crash:rank=1,open=2;crash:rank=1,open=3;crash:rank=1,open=4,how=exit';
    await withFailingEngine({ ...config, faults }, async (engine) => {
      const run = await runUntilStopped(engine, deathWorkload());
      expect(run.stopped).toBeInstanceOf(EngineStoppedError);
      expect(run.stopped!.rankError?.rank).toBe(1);
      expect(run.stopped!.message).toMatch(/rank 1 failed: worker thread exited with code 70 \(no recovery after 3 restart attempts\)/);
      for (const ended of run.stopped!.finished) expect(ended.errorMessage).toMatch(/rank 1 failed/);
      expect(run.wallMs).toBeLessThan(WALL_BOUND_MS);
      expect(engine.liveRankThreads()).toBe(0);
    });
  });

  it.each(['throw', 'exit'])('a rank that dies (%s) while opening its device at start fails Engine.create with an error naming it', async (how) => {
    const started = performance.now();
    const creating = Engine.create({ backend: 'host', model: 'tiny', tp: 4, gpuBlocks: 16, faults: `crash:rank=3,open=1,how=${how}` });
    await expect(creating).rejects.toBeInstanceOf(RankError);
    await expect(creating).rejects.toThrow(/^rank 3 failed: /);
    expect(performance.now() - started).toBeLessThan(WALL_BOUND_MS);
  });
});
