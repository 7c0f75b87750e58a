import { describe, expect, it } from 'vitest';
import { EngineStoppedError } from '../../src/runtime/engine.js';
import { expectCorrectOutputs, runUntilStopped, tokens, withFailingEngine } from './helpers.js';
import { DEATH_CONFIG, deathWorkload, positions, RANK_DEATHS, WALL_BOUND_MS } from './rank-deaths.js';

/**
 * Rank death without rankRestart (docs/architecture.md, "Failure recovery"): the engine never
 * hangs; every unfinished request ends with an error naming the rank and the
 * cause, the rank threads (and their devices) are gone, and the engine
 * refuses further work with the same error.
 */
describe.each(RANK_DEATHS)('a rank that $name, without rankRestart', (death) => {
  it.each(positions(death))('rank %i of 4: the run stops in bounded time and every unfinished request names the rank', async (rank) => {
    await withFailingEngine({ ...DEATH_CONFIG, faults: death.fault(rank) }, async (engine) => {
      const run = await runUntilStopped(engine, deathWorkload());
      expect(run.stopped).toBeInstanceOf(EngineStoppedError);
      const stopped = run.stopped!;
      expect(stopped.code).toBe('ERR_KVTIER_ENGINE');
      expect(stopped.rankError?.rank).toBe(rank);
      expect(stopped.message).toMatch(new RegExp(`rank ${rank} failed: `));
      expect(stopped.message).toMatch(death.cause);

      expect(stopped.finished.length).toBeGreaterThan(0);
      for (const ended of stopped.finished) {
        expect(ended.finishReason).toBe('error');
        expect(ended.errorMessage).toMatch(new RegExp(`request ended because rank ${rank} failed: `));
      }
      // What finished before the death is exact.
      expectCorrectOutputs(run.finished, run.finished.length - stopped.finished.length);
      expect(run.wallMs).toBeLessThan(WALL_BOUND_MS);

      expect(engine.liveRankThreads()).toBe(0);
      expect(engine.hasPendingWork()).toBe(false);
      expect(engine.metrics().leaks).toEqual({ gpuBlocks: 0, cpuBlocks: 0 });
      expect(() => engine.addRequest({ promptTokens: tokens(1, 10), maxTokens: 2 })).toThrow(EngineStoppedError);
      await expect(engine.step()).rejects.toBe(stopped);
      await engine.shutdown();
      expect(engine.liveRankThreads()).toBe(0);
    });
  });
});
