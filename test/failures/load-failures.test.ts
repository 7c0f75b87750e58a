import { describe, expect, it } from 'vitest';
import {
  byId,
  evictThenReuse,
  expectCorrectOutputs,
  expectIdle,
  idsEndedWith,
  mismatches,
  runWaves,
  SHARED_PREFIX_CONFIG,
  sharedPrefixAfterEviction,
  SMALL_GPU,
  tokens,
  withFailingEngine,
} from './helpers.js';
import { probe } from '../../src/testing/index.js';

/**
 * Failed loads through the engine (docs/architecture.md, "Failure recovery"): the ranks' devices
 * poison the GPU blocks whose load failed and report them; the scheduler
 * truncates every request computed through them and recomputes (or, under
 * failurePolicy 'fail', ends exactly those requests with an error).
 */

describe.each([2, 4])('failed loads with failurePolicy recompute, tp = %i', (tp) => {
  it('every request recomputes what failed and answers exactly', async () => {
    await withFailingEngine({ ...SMALL_GPU, tp, faults: `load-fail:rank=${tp - 1},p=0.3`, faultSeed: 5 }, async (engine) => {
      const finished = await runWaves(engine, evictThenReuse());
      expectCorrectOutputs(finished, 16);
      const m = engine.metrics();
      expect(m.hits.cpuTierTokens).toBeGreaterThan(0);
      expect(m.loadFailures.blocks).toBeGreaterThan(0);
      expect(m.loadFailures.requestsRecovered).toBeGreaterThan(0);
      expect(m.transfers.cpuToGpu.failedJobs).toBeGreaterThan(0);
      expect(m.requests.failed).toBe(0);
      await expectIdle(engine);
    });
  });

  it('requests that share the failed blocks through the prefix cache, waiting on the same load, all recompute', async () => {
    const scenario = sharedPrefixAfterEviction();
    // The first block any load writes on the last rank fails: the family's shared prefix.
    await withFailingEngine({ ...SHARED_PREFIX_CONFIG, tp, faults: `load-fail:rank=${tp - 1},p=1,count=1` }, async (engine) => {
      const finished = await runWaves(engine, scenario.waves);
      expectCorrectOutputs(finished, finished.length);
      const family = scenario.family.map((id) => byId(finished).get(id)!);
      // The prefix's only load failed at its first block: no family member was served any of it, from either tier.
      expect(family.map((f) => f.cpuTierHitTokens + f.gpuPrefixHitTokens)).toEqual(family.map(() => 0));
      const m = engine.metrics();
      expect(m.transfers.cpuToGpu.failedJobs).toBe(1);
      expect(m.loadFailures.blocks).toBe(1);
      expect(m.loadFailures.requestsRecovered).toBe(scenario.family.length);
      expect((await probe(engine).faultStats())[tp - 1].loadBlocksFailed).toBe(1);
      await expectIdle(engine);
    });
  });
});

describe('failed loads with failurePolicy fail', () => {
  it('ends exactly the requests computed through the failed block with an error naming it; the others are exact', async () => {
    const scenario = sharedPrefixAfterEviction();
    const later = { id: 'later', promptTokens: [...tokens(40, 64), ...tokens(999, 32)], maxTokens: 5, seed: 77 };
    const config = { ...SHARED_PREFIX_CONFIG, tp: 2, failurePolicy: 'fail' as const, faults: 'load-fail:rank=1,p=1,count=1' };
    await withFailingEngine(config, async (engine) => {
      const finished = await runWaves(engine, [...scenario.waves, [later]]);
      expect(idsEndedWith(finished, 'error').sort()).toEqual([...scenario.family].sort());
      for (const id of scenario.family) {
        expect(byId(finished).get(id)!.errorMessage).toMatch(/KV load failed for GPU block \d+ .*failurePolicy is 'fail'/);
      }
      // The strangers, the first waves, and a later request with the same prefix (reloaded, not served poison) are exact.
      expectCorrectOutputs(finished, finished.length - scenario.family.length);
      for (const id of scenario.strangers) expect(byId(finished).get(id)!.finishReason).toBe('length');
      expect(byId(finished).get('later')).toMatchObject({ finishReason: 'length', cpuTierHitTokens: 64 });
      const m = engine.metrics();
      expect(m.requests.failed).toBe(scenario.family.length);
      expect(m.loadFailures.requestsRecovered).toBe(0);
      await expectIdle(engine);
    });
  });

  it('under random failures every request either answers exactly or ends with an error naming a failed block', async () => {
    const config = { ...SMALL_GPU, tp: 2, failurePolicy: 'fail' as const, faults: 'load-fail:rank=0,p=0.2', faultSeed: 11 };
    await withFailingEngine(config, async (engine) => {
      const finished = await runWaves(engine, evictThenReuse());
      const failed = idsEndedWith(finished, 'error');
      expect(failed.length).toBeGreaterThan(0);
      for (const id of failed) expect(byId(finished).get(id)!.errorMessage).toMatch(/KV load failed for GPU block \d+/);
      expect(mismatches(finished)).toEqual([]);
      expect(finished).toHaveLength(16);
      expect(engine.metrics().requests.failed).toBe(failed.length);
      await expectIdle(engine);
    });
  });
});

describe('load fault rules', () => {
  it('listed GPU blocks fail whenever a load writes them, and requests still answer exactly', async () => {
    const everyThirdBlock = Array.from({ length: 8 }, (_, i) => i * 3).join('|');
    await withFailingEngine({ ...SMALL_GPU, tp: 2, faults: `load-fail:rank=0,blocks=${everyThirdBlock}` }, async (engine) => {
      const finished = await runWaves(engine, evictThenReuse());
      expectCorrectOutputs(finished, 16);
      const m = engine.metrics();
      expect(m.loadFailures.blocks).toBeGreaterThan(0);
      expect(m.loadFailures.requestsRecovered).toBeGreaterThan(0);
      await expectIdle(engine);
    });
  });

  it('a count caps the failures of each targeted rank', async () => {
    await withFailingEngine({ ...SMALL_GPU, tp: 2, faults: 'load-fail:p=1,count=3' }, async (engine) => {
      const finished = await runWaves(engine, evictThenReuse());
      expectCorrectOutputs(finished, 16);
      expect((await probe(engine).faultStats()).map((s) => s.loadBlocksFailed)).toEqual([3, 3]);
      expect(engine.metrics().loadFailures.blocks).toBeGreaterThan(0);
      await expectIdle(engine);
    });
  });

  it('a rule starting after the last step injects nothing', async () => {
    await withFailingEngine({ ...SMALL_GPU, tp: 2, faults: 'load-fail:p=1,after=100000' }, async (engine) => {
      const finished = await runWaves(engine, evictThenReuse());
      expectCorrectOutputs(finished, 16);
      expect(engine.metrics().hits.cpuTierTokens).toBeGreaterThan(0);
      expect(engine.metrics().loadFailures.blocks).toBe(0);
      expect((await probe(engine).faultStats()).map((s) => s.loadBlocksFailed)).toEqual([0, 0]);
    });
  });
});
