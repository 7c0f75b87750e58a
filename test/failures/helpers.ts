import { expect } from 'vitest';
import { EngineStoppedError, type Engine } from '../../src/runtime/engine.js';
import type { EngineConfigInput, FinishedRequest, RequestSpec } from '../../src/runtime/engine-types.js';
import { probe, type RankState } from '../../src/testing/index.js';
import { expectIdle, FAST, mismatches, runWaves, TINY, tokens, withEngine } from '../e2e/helpers.js';

/**
 * Scenario builders for failure tests: workloads that make the engine load
 * from the CPU tier (where load faults bite), share prefixes through the GPU
 * prefix cache, and preempt; and runners that collect what a run produced
 * whether it finished or the engine stopped.
 */

export { expectIdle, FAST, mismatches, runWaves, TINY, tokens };

/** Creates a host-backend engine, runs the body, and always shuts the engine down (also after it stopped). */
export const withFailingEngine = withEngine;

/** A small GPU pool (24 blocks of 16 tokens) over a large CPU tier: prompts cycle out of the GPU and come back from the CPU. */
export const SMALL_GPU: EngineConfigInput = { ...FAST, gpuBlocks: 24, cpuBlocks: 512, maxNumSeqs: 2 };

/** Eight 8-block prompts computed once, pushed out of a small GPU pool, then asked again (loaded from the CPU tier). */
export function evictThenReuse(maxTokens = 4, seed = 700): RequestSpec[][] {
  const prompts = Array.from({ length: 8 }, (_, i) => tokens(seed + i, 128));
  return [
    prompts.map((p, i) => ({ id: `first${i}`, promptTokens: p, maxTokens, seed: i })),
    prompts.map((p, i) => ({ id: `again${i}`, promptTokens: p, maxTokens, seed: 10 + i })),
  ];
}

export interface SharedPrefixScenario {
  readonly waves: RequestSpec[][];
  /** Requests of the second wave that share the offloaded prefix: one loads it, the others wait on its pending blocks. */
  readonly family: string[];
  /** Requests of the second wave that share nothing with it. */
  readonly strangers: string[];
}

/**
 * A 4-block prefix is computed and offloaded, then three unrelated prompts,
 * one at a time (so nothing is preempted or loaded), push it out of the
 * 24-block GPU pool. The last wave starts with a family
 * of requests sharing that prefix, admitted in one step: the first issues the
 * only load of the prefix, the others hit its still-pending blocks in the GPU
 * prefix cache and wait for that same load. Two strangers follow.
 */
export function sharedPrefixAfterEviction(familySize = 4, seed = 40): SharedPrefixScenario {
  const prefix = tokens(seed, 64);
  const first: RequestSpec[] = [
    { id: 'owner', promptTokens: [...prefix, ...tokens(seed + 1, 32)], maxTokens: 3, seed: 1 },
    ...[0, 1, 2].map((i) => ({ id: `flush${i}`, promptTokens: tokens(seed + 10 + i, 128), maxTokens: 2, seed: 2 + i })),
  ];
  const family = Array.from({ length: familySize }, (_, i) => `family${i}`);
  const strangers = ['stranger0', 'stranger1'];
  const second: RequestSpec[] = [
    ...family.map((id, i) => ({ id, promptTokens: [...prefix, ...tokens(seed + 100 + i, 32)], maxTokens: 6, seed: 20 + i })),
    ...strangers.map((id, i) => ({ id, promptTokens: tokens(seed + 200 + i, 48), maxTokens: 6, seed: 30 + i })),
  ];
  return { waves: [...first.map((r) => [r]), second], family, strangers };
}

/** Config for sharedPrefixAfterEviction: room for the whole family in one step. */
export const SHARED_PREFIX_CONFIG: EngineConfigInput = { ...FAST, gpuBlocks: 24, cpuBlocks: 256, maxNumSeqs: 8 };

/** Finished requests by id. */
export function byId(finished: readonly FinishedRequest[]): Map<string, FinishedRequest> {
  return new Map(finished.map((f) => [f.id, f]));
}

/** Ids of the requests that ended with `reason`. */
export function idsEndedWith(finished: readonly FinishedRequest[], reason: FinishedRequest['finishReason']): string[] {
  return finished.filter((f) => f.finishReason === reason).map((f) => f.id);
}

export interface StoppedRun {
  /** The error the run ended with (null when it completed). */
  readonly stopped: EngineStoppedError | null;
  /** Requests that finished normally before the stop, then those the stop ended. */
  readonly finished: FinishedRequest[];
  readonly wallMs: number;
}

/** Runs waves until they finish or the engine stops; a stop is returned, not thrown. */
export async function runUntilStopped(engine: Engine, waves: readonly RequestSpec[][]): Promise<StoppedRun> {
  const started = performance.now();
  const finished: FinishedRequest[] = [];
  try {
    for (const wave of waves) {
      await engine.addRequests(wave);
      while (engine.hasPendingWork()) finished.push(...(await engine.step()).finished);
    }
    return { stopped: null, finished, wallMs: performance.now() - started };
  } catch (error) {
    if (!(error instanceof EngineStoppedError)) throw error;
    return { stopped: error, finished: [...finished, ...error.finished], wallMs: performance.now() - started };
  }
}

/** Every finished request equals the reference model, and at least `count` finished normally. */
export function expectCorrectOutputs(finished: readonly FinishedRequest[], count: number): void {
  expect(mismatches(finished)).toEqual([]);
  expect(finished.filter((f) => f.finishReason === 'length' || f.finishReason === 'stopped').length).toBeGreaterThanOrEqual(count);
}

const EMPTY_RANK: RankState = {
  tables: 0,
  inFlightJobs: 0,
  deferredStores: 0,
  loadingBlocks: 0,
  finishingRequests: 0,
  deviceJobs: 0,
};

/**
 * The ranks and the scheduler agree that nothing survived a rank loss: no
 * rank holds a table or a job, the GPU prefix cache and the CPU tier are
 * empty, and no job is half reported.
 */
export async function expectEverythingForgotten(engine: Engine): Promise<void> {
  for (const state of await probe(engine).rankStates()) expect(state).toEqual(EMPTY_RANK);
  const held = probe(engine).holdings();
  expect({ cached: held.gpu.cached, referenced: held.gpu.referenced, pending: held.gpu.pending }).toEqual({
    cached: 0,
    referenced: 0,
    pending: 0,
  });
  expect(held.cpuTier?.usedBlocks ?? 0).toBe(0);
  expect(held.partialJobs).toBe(0);
}

/** Steps an engine with nothing to do until its step counter reaches `step`. */
export async function idleUntilStep(engine: Engine, step: number): Promise<void> {
  expect(engine.metrics().steps).toBeLessThan(step);
  while (engine.metrics().steps < step) await engine.step();
}

/**
 * Steps until some rank reported a transfer another has not (the aggregator
 * holds a partial report). Bounded by steps, not time: a transfer no rank
 * stalls finishes within a few idle steps.
 */
export async function stepUntilPartiallyReported(engine: Engine, maxSteps = 10_000): Promise<void> {
  for (let i = 0; i < maxSteps && probe(engine).holdings().partialJobs === 0; i++) await engine.step();
  expect(probe(engine).holdings().partialJobs).toBeGreaterThan(0);
}
