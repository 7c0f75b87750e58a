import { describe, expect, it } from 'vitest';
import type { EngineOptions } from '../../src/runtime/engine.js';
import type { EngineConfigInput, FinishedRequest, RequestSpec } from '../../src/runtime/engine-types.js';
import { withSwitches, type SchedulerTestOnlyOptions } from '../../src/testing/index.js';
import {
  byId,
  evictThenReuse,
  mismatches,
  runWaves,
  SHARED_PREFIX_CONFIG,
  sharedPrefixAfterEviction,
  SMALL_GPU,
  tokens,
  withFailingEngine,
} from './helpers.js';

/**
 * Failed-load recovery through the engine, once as built and once with one
 * of its steps switched off (the scheduler's test-only switches): the second
 * run must go wrong, which shows that step is what keeps outputs right.
 */

interface Outcome {
  readonly finished: FinishedRequest[];
  readonly wrong: string[];
  readonly failedBlocks: number;
}

async function run(config: EngineConfigInput, waves: RequestSpec[][], scheduler: SchedulerTestOnlyOptions = {}): Promise<Outcome> {
  const options: EngineOptions = withSwitches({ scheduler });
  return withFailingEngine(
    config,
    async (engine) => {
      const finished = await runWaves(engine, waves);
      return { finished, wrong: mismatches(finished), failedBlocks: engine.metrics().loadFailures.blocks };
    },
    options,
  );
}

describe('truncating requests computed through a failed block', () => {
  const config: EngineConfigInput = { ...SMALL_GPU, tp: 2, faults: 'load-fail:rank=1,p=0.3', faultSeed: 5 };

  it('as built, requests recompute the failed blocks and answer exactly', async () => {
    const outcome = await run(config, evictThenReuse());
    expect(outcome.failedBlocks).toBeGreaterThan(0);
    expect(outcome.wrong).toEqual([]);
  });

  it('without it, requests sample from poisoned KV and answer wrong', async () => {
    const outcome = await run(config, evictThenReuse(), { skipInvalidBlockRecovery: true });
    expect(outcome.failedBlocks).toBeGreaterThan(0);
    expect(outcome.wrong.length).toBeGreaterThan(0);
  });
});

describe('removing failed blocks from the GPU prefix cache', () => {
  // Under failurePolicy 'fail' nobody recomputes the failed block in place: only the prefix cache stands between it and a later request.
  const scenario = sharedPrefixAfterEviction();
  const later: RequestSpec = { id: 'later', promptTokens: [...tokens(40, 64), ...tokens(999, 32)], maxTokens: 5, seed: 77 };
  const waves = [...scenario.waves, [later]];
  const config: EngineConfigInput = { ...SHARED_PREFIX_CONFIG, tp: 2, failurePolicy: 'fail', faults: 'load-fail:rank=1,p=1,count=1' };

  it('as built, a later request with the same prefix misses the failed block and reloads it correctly', async () => {
    const outcome = await run(config, waves);
    expect(byId(outcome.finished).get('later')).toMatchObject({ finishReason: 'length', gpuPrefixHitTokens: 0 });
    expect(outcome.wrong).toEqual([]);
  });

  it('without it, the poisoned block is served to the later request from the prefix cache and its output is wrong', async () => {
    const outcome = await run(config, waves, { keepInvalidBlocksCached: true });
    expect(byId(outcome.finished).get('later')!.gpuPrefixHitTokens).toBeGreaterThan(0);
    expect(outcome.wrong).toEqual(['later']);
  });
});
