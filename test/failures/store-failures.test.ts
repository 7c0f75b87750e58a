import { describe, expect, it } from 'vitest';
import type { EngineConfigInput, RequestSpec } from '../../src/runtime/engine-types.js';
import { evictThenReuse, expectCorrectOutputs, expectIdle, mismatches, runWaves, SMALL_GPU, tokens, withFailingEngine } from './helpers.js';
import { probe, withSwitches } from '../../src/testing/index.js';

/**
 * Failed stores (docs/architecture.md, "Offloading"): a store job failed if any rank's part
 * failed; its CPU blocks never become loadable, so later requests recompute
 * instead of loading what the failed copy left there (poison on the host
 * backend). Requests are not affected.
 */

/** Decoding requests in a pool too small for them: they preempt each other, flush stores, and resume. */
function preemptionStorm(): RequestSpec[][] {
  return [Array.from({ length: 8 }, (_, i) => ({ id: `storm${i}`, promptTokens: tokens(300 + i, 60 + 8 * i), maxTokens: 40, seed: i }))];
}

describe('failed stores', () => {
  it('a store that fails on one rank fails as a whole: nothing of it is loaded later, and requests recompute exactly', async () => {
    await withFailingEngine({ ...SMALL_GPU, tp: 4, faults: 'store-fail:rank=2,p=1' }, async (engine) => {
      const finished = await runWaves(engine, evictThenReuse());
      expectCorrectOutputs(finished, 16);
      const m = engine.metrics();
      expect(m.transfers.gpuToCpu.jobs).toBeGreaterThan(0);
      expect(m.storeFailures).toBe(m.transfers.gpuToCpu.jobs);
      expect(m.hits.cpuTierTokens).toBe(0);
      expect(m.transfers.cpuToGpu.jobs).toBe(0);
      expect(probe(engine).holdings().cpuTier!.readyBlocks).toBe(0);
      expect((await probe(engine).faultStats()).map((s) => s.storesFailed > 0)).toEqual([false, false, true, false]);
      await expectIdle(engine);
    });
  });

  it('with some stores failing, the blocks that were stored are loaded and the rest recomputed, all exactly', async () => {
    await withFailingEngine({ ...SMALL_GPU, tp: 2, faults: 'store-fail:rank=0,p=0.5', faultSeed: 4 }, async (engine) => {
      const finished = await runWaves(engine, evictThenReuse());
      expectCorrectOutputs(finished, 16);
      const m = engine.metrics();
      expect(m.storeFailures).toBeGreaterThan(0);
      expect(m.storeFailures).toBeLessThan(m.transfers.gpuToCpu.jobs);
      expect(m.hits.cpuTierTokens).toBeGreaterThan(0);
      await expectIdle(engine);
    });
  });

  it('requests preempted while stores fail resume from what was stored and recompute the rest, exactly', async () => {
    const config: EngineConfigInput = { ...SMALL_GPU, gpuBlocks: 20, maxNumSeqs: 8, tp: 2, faults: 'store-fail:rank=1,p=0.5', faultSeed: 9 };
    await withFailingEngine(config, async (engine) => {
      const finished = await runWaves(engine, preemptionStorm());
      expectCorrectOutputs(finished, 8);
      const m = engine.metrics();
      expect(m.preemptions).toBeGreaterThan(0);
      expect(m.storeFailures).toBeGreaterThan(0);
      await expectIdle(engine);
    });
  });
});

describe('failed stores, with the failure reported as success (sensitivity)', () => {
  it('the scheduler takes the poisoned CPU blocks for KV and the requests loading them answer wrong', async () => {
    const config = { ...SMALL_GPU, tp: 2, faults: 'store-fail:rank=1,p=1' };
    const outcome = await withFailingEngine(
      config,
      async (engine) => {
        const finished = await runWaves(engine, evictThenReuse());
        return { wrong: mismatches(finished), cpuTierHitTokens: engine.metrics().hits.cpuTierTokens };
      },
      withSwitches({ worker: { reportFailedStoresAsOk: true } }),
    );
    expect(outcome.cpuTierHitTokens).toBeGreaterThan(0);
    expect(outcome.wrong.length).toBeGreaterThan(0);
  });
});
