import { expect } from 'vitest';
import { SeededRandom } from '../../src/core/prng.js';
import { referenceGenerate } from '../../src/model/reference.js';
import { Engine, type EngineOptions } from '../../src/runtime/engine.js';
import type { EngineConfigInput, FinishedRequest, RequestSpec } from '../../src/runtime/engine-types.js';
import { probe } from '../../src/testing/index.js';
import { TINY } from '../support/tiny.js';

export { TINY };

/** Light compute emulation keeps runs fast; correctness does not depend on it. */
export const FAST = { computeNsPerToken: 2_000 } as const;

/** A deterministic token stream for building prompts. */
export function tokens(seed: number, count: number, vocab = TINY.vocabSize): number[] {
  return Array.from(new SeededRandom(seed).tokens(count, vocab));
}

/** Requests that share `prefix` and differ after it. */
export function sharedPrefixRequests(prefix: number[], count: number, suffixTokens: number, maxTokens: number, seed = 1): RequestSpec[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `shared-${seed}-${i}`,
    promptTokens: [...prefix, ...tokens(seed * 1000 + i, suffixTokens)],
    maxTokens,
    seed: seed * 100 + i,
  }));
}

/** Creates a host-backend engine, runs `body`, and always shuts it down. */
export async function withEngine<T>(
  config: EngineConfigInput,
  body: (engine: Engine) => Promise<T>,
  options: EngineOptions = {},
): Promise<T> {
  const engine = await Engine.create({ backend: 'host', model: 'tiny', ...config }, options);
  try {
    return await body(engine);
  } finally {
    await engine.shutdown();
    // Every rank thread exited: nothing of the run outlives it.
    expect(engine.liveRankThreads()).toBe(0);
  }
}

/** Every finished request's tokens equal the reference model's (a list of ids that differ). */
export function mismatches(finished: readonly FinishedRequest[]): string[] {
  const wrong: string[] = [];
  for (const f of finished) {
    if (f.finishReason !== 'length' && f.finishReason !== 'stopped') continue;
    const expected = referenceGenerate(TINY, {
      promptTokens: f.promptTokens,
      maxTokens: f.maxTokens,
      seed: f.seed,
      stopToken: f.stopToken,
    });
    if (expected.outputTokens.join(',') !== f.outputTokens.join(',')) wrong.push(f.id);
  }
  return wrong;
}

export function expectAllMatchReference(finished: readonly FinishedRequest[], expectedCount: number): void {
  expect(finished.filter((f) => f.finishReason === 'length' || f.finishReason === 'stopped')).toHaveLength(expectedCount);
  expect(mismatches(finished)).toEqual([]);
}

/** No GPU or CPU block leaked, no transfer pending on any rank. */
export async function expectIdle(engine: Engine): Promise<void> {
  expect(engine.hasPendingWork()).toBe(false);
  expect(engine.metrics().leaks).toEqual({ gpuBlocks: 0, cpuBlocks: 0 });
  for (const pending of await probe(engine).pendingJobsPerRank()) expect(pending).toBe(0);
}

/** Adds requests in waves: each wave is added once the previous one finished. */
export async function runWaves(engine: Engine, waves: readonly RequestSpec[][]): Promise<FinishedRequest[]> {
  const finished: FinishedRequest[] = [];
  for (const wave of waves) {
    await engine.addRequests(wave);
    finished.push(...(await engine.run()));
  }
  return finished;
}
