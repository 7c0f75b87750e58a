import { describe, expect, it } from 'vitest';
import { evictThenReuse, expectCorrectOutputs, expectIdle, runWaves, SHARED_PREFIX_CONFIG, sharedPrefixAfterEviction, SMALL_GPU, withFailingEngine } from './helpers.js';
import { probe } from '../../src/testing/index.js';

/**
 * A rank whose transfers run late: the aggregator counts a job (and a
 * request's sending/receiving) finished only when every rank reported it, so
 * nothing reads or frees blocks early.
 */
describe.each([0, 3])('transfers delayed on rank %i only (tp = 4)', (rank) => {
  it('loads and stores complete on every rank before anything depends on them, and outputs are exact', async () => {
    await withFailingEngine({ ...SMALL_GPU, tp: 4, faults: `delay:rank=${rank},ms=15` }, async (engine) => {
      const finished = await runWaves(engine, evictThenReuse());
      expectCorrectOutputs(finished, 16);
      const m = engine.metrics();
      expect(m.hits.cpuTierTokens).toBeGreaterThan(0);
      expect(m.transfers.cpuToGpu.failedJobs + m.transfers.gpuToCpu.failedJobs).toBe(0);
      const delayed = (await probe(engine).faultStats()).map((s) => s.jobsDelayed > 0);
      expect(delayed).toEqual([0, 1, 2, 3].map((r) => r === rank));
      await expectIdle(engine);
    });
  });
});

describe('delays combined with failed loads', () => {
  it('a late rank and a failing rank together still give exact outputs for requests sharing the failed prefix', async () => {
    const scenario = sharedPrefixAfterEviction();
    const faults = 'delay:rank=0,ms=10;load-fail:rank=1,p=1,count=1';
    await withFailingEngine({ ...SHARED_PREFIX_CONFIG, tp: 2, faults }, async (engine) => {
      const finished = await runWaves(engine, scenario.waves);
      expectCorrectOutputs(finished, finished.length);
      expect(engine.metrics().loadFailures.requestsRecovered).toBe(scenario.family.length);
      await expectIdle(engine);
    });
  });
});
