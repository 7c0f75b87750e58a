import { describe, expect, it } from 'vitest';
import { evictThenReuse, idleUntilStep, runWaves, SMALL_GPU } from '../failures/helpers.js';
import { FAST, withEngine } from './helpers.js';

/**
 * The engine keeps each rank's forwards and copy jobs as its device timed
 * them only when created to (Engine.create's deviceTrace): a normal engine
 * keeps nothing, and a traced one says which of a rank's devices timed each
 * span, since a restarted rank's new device has a new time origin.
 */
describe("the engine's device spans", () => {
  it('are not kept by an engine created without deviceTrace', async () => {
    await withEngine({ ...FAST, tp: 1, gpuBlocks: 64, cpuBlocks: 128 }, async (engine) => {
      await runWaves(engine, evictThenReuse(2));
      expect(engine.deviceSpans()).toBeNull();
    });
  });

  it("name the device of a restarted rank that timed them, each rank's steps in order", async () => {
    const [computed, again] = evictThenReuse();
    await withEngine({ ...SMALL_GPU, tp: 2, rankRestart: true, faults: 'crash:rank=1,step=100' }, async (engine) => {
      await runWaves(engine, [computed]);
      await idleUntilStep(engine, 100);
      await engine.step();
      expect(engine.metrics().rankRestarts).toBe(1);
      await runWaves(engine, [again]);
      const spans = engine.deviceSpans()!;
      for (const rank of [0, 1]) {
        const own = spans.filter((s) => s.rank === rank);
        const steps = own.map((s) => s.step);
        expect(steps).toEqual([...steps].sort((a, b) => a - b));
        expect(own.some((s) => s.forward !== null && s.step < 100)).toBe(true);
        expect(own.some((s) => s.forward !== null && s.step > 100)).toBe(true);
        // Only rank 1 opened a second device, and only its later steps name it.
        for (const s of own) expect(s.deviceOpen).toBe(rank === 1 && s.step > 100 ? 2 : 1);
      }
      expect(spans.some((s) => s.copyJobs.length > 0)).toBe(true);
    }, { deviceTrace: true });
  });
});
