import { describe, expect, it } from 'vitest';
import type { Engine } from '../../src/runtime/engine.js';
import type { EngineConfigInput, EngineMetrics, FinishedRequest, RequestSpec } from '../../src/runtime/engine-types.js';
import { createMetricsRegistry } from '../../src/prometheus/metrics-registry.js';
import { Exposition } from '../support/exposition.js';
import {
  evictThenReuse,
  expectCorrectOutputs,
  expectIdle,
  FAST,
  runUntilStopped,
  SHARED_PREFIX_CONFIG,
  sharedPrefixAfterEviction,
  SMALL_GPU,
  tokens,
  withFailingEngine,
} from './helpers.js';

/**
 * Hits are counted once, when served (README, "The report"): whatever a run
 * goes through (preemptions, failed loads under either failure policy, a
 * rank lost and restarted), GPU hits + CPU hits + prefill computed = prompt
 * tokens reached + recomputed tokens, in the engine's metrics, in the
 * per-request figures and in the Prometheus scrape alike.
 */

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
const answered = (f: FinishedRequest) => f.finishReason === 'length' || f.finishReason === 'stopped';

/** Decoding requests in a pool too small for them: they preempt each other and resume. */
function preemptionStorm(): RequestSpec[][] {
  return [Array.from({ length: 8 }, (_, i) => ({ id: `storm${i}`, promptTokens: tokens(300 + i, 60 + 8 * i), maxTokens: 40, seed: i }))];
}

/** The identity and its consequences, once every request finished. */
async function expectTokenIdentity(engine: Engine, finished: readonly FinishedRequest[]): Promise<EngineMetrics> {
  const m = engine.metrics();
  const { tokens: t, hits, rereads } = m;
  expect(hits.gpuPrefixTokens + hits.cpuTierTokens + t.prefillComputed).toBe(t.promptReached + t.recomputed);
  // Only a request that ended before its prompt was through (an error, an abort) leaves prompt tokens unreached.
  const endedEarly = finished.filter((f) => !answered(f));
  expect(t.prompt - t.promptReached).toBeGreaterThanOrEqual(0);
  expect(t.prompt - t.promptReached).toBeLessThanOrEqual(sum(endedEarly.map((f) => f.promptTokens.length)));
  expect(t.prompt).toBe(sum(finished.map((f) => f.promptTokens.length)));
  // The per-request figures add up to the engine's.
  expect(sum(finished.map((f) => f.gpuPrefixHitTokens))).toBe(hits.gpuPrefixTokens);
  expect(sum(finished.map((f) => f.cpuTierHitTokens))).toBe(hits.cpuTierTokens);
  expect(sum(finished.map((f) => f.gpuPrefixRereadTokens))).toBe(rereads.gpuPrefixTokens);
  expect(sum(finished.map((f) => f.cpuTierRereadTokens))).toBe(rereads.cpuTierTokens);
  // The last prompt token is always computed (its logits give the first output token): never a hit.
  for (const f of finished) expect(f.gpuPrefixHitTokens + f.cpuTierHitTokens, f.id).toBeLessThan(f.promptTokens.length);
  // The scrape says the same.
  const scrape = new Exposition(await createMetricsRegistry(engine).metrics());
  expect(scrape.value('kvtier_hit_tokens_total', { tier: 'gpu_prefix' })).toBe(hits.gpuPrefixTokens);
  expect(scrape.value('kvtier_hit_tokens_total', { tier: 'cpu' })).toBe(hits.cpuTierTokens);
  expect(scrape.value('kvtier_reread_tokens_total', { tier: 'gpu_prefix' })).toBe(rereads.gpuPrefixTokens);
  expect(scrape.value('kvtier_reread_tokens_total', { tier: 'cpu' })).toBe(rereads.cpuTierTokens);
  expect(scrape.value('kvtier_tokens_total', { kind: 'recomputed' })).toBe(t.recomputed);
  expect(scrape.value('kvtier_tokens_total', { kind: 'prompt_reached' })).toBe(t.promptReached);
  return m;
}

interface Scenario {
  readonly name: string;
  readonly config: EngineConfigInput;
  readonly waves: () => RequestSpec[][];
  /** What makes the scenario the one it is named after. */
  readonly check: (m: EngineMetrics) => void;
}

const SCENARIOS: readonly Scenario[] = [
  {
    name: 'preemptions',
    config: { ...FAST, tp: 2, gpuBlocks: 20, cpuBlocks: 512, maxNumSeqs: 8 },
    waves: preemptionStorm,
    check: (m) => {
      expect(m.preemptions).toBeGreaterThan(0);
      // Resumed requests read their own blocks again and compute the rest again: neither is a hit.
      expect(m.rereads.gpuPrefixTokens + m.rereads.cpuTierTokens).toBeGreaterThan(0);
      expect(m.tokens.recomputed).toBeGreaterThan(0);
      expect(m.tokens.promptReached).toBe(m.tokens.prompt);
    },
  },
  {
    name: 'failed loads, failurePolicy recompute',
    config: { ...SMALL_GPU, tp: 2, faults: 'load-fail:rank=1,p=0.3', faultSeed: 5 },
    waves: () => evictThenReuse(),
    check: (m) => {
      expect(m.loadFailures.requestsRecovered).toBeGreaterThan(0);
      expect(m.hits.cpuTierTokens).toBeGreaterThan(0);
      expect(m.tokens.promptReached).toBe(m.tokens.prompt);
    },
  },
  {
    name: 'failed loads, failurePolicy fail',
    config: { ...SHARED_PREFIX_CONFIG, tp: 2, failurePolicy: 'fail', faults: 'load-fail:rank=1,p=1,count=1' },
    waves: () => sharedPrefixAfterEviction().waves,
    check: (m) => {
      expect(m.requests.failed).toBeGreaterThan(0);
      // The failed requests never got through their prompts.
      expect(m.tokens.promptReached).toBeLessThan(m.tokens.prompt);
    },
  },
  {
    name: 'a rank lost and restarted',
    config: { ...SMALL_GPU, tp: 2, maxNumSeqs: 3, rankRestart: true, faults: 'crash:rank=1,step=30' },
    waves: () => evictThenReuse(12),
    check: (m) => {
      expect(m.rankRestarts).toBe(1);
      expect(m.tokens.recomputed).toBeGreaterThan(0);
      expect(m.tokens.promptReached).toBe(m.tokens.prompt);
    },
  },
];

describe.each(SCENARIOS)('the token identity under $name', (scenario) => {
  it('hits + prefill computed = prompt reached + recomputed, in the metrics, per request and in the scrape', async () => {
    await withFailingEngine(scenario.config, async (engine) => {
      const run = await runUntilStopped(engine, scenario.waves());
      expect(run.stopped).toBeNull();
      expectCorrectOutputs(run.finished, 1);
      scenario.check(await expectTokenIdentity(engine, run.finished));
      await expectIdle(engine);
    });
  });
});

describe('hits counted when served', () => {
  it('with every CPU-tier load failing, the CPU tier counts no hit and nothing is recomputed', async () => {
    await withFailingEngine({ ...SMALL_GPU, tp: 2, faults: 'load-fail:p=1' }, async (engine) => {
      const run = await runUntilStopped(engine, evictThenReuse());
      expectCorrectOutputs(run.finished, 16);
      const m = await expectTokenIdentity(engine, run.finished);
      // Loads were issued, and every one failed.
      expect(m.transfers.cpuToGpu.jobs).toBeGreaterThan(0);
      expect(m.transfers.cpuToGpu.failedJobs).toBe(m.transfers.cpuToGpu.jobs);
      expect(m.hits.cpuTierTokens).toBe(0);
      expect(m.rereads.cpuTierTokens).toBe(0);
      for (const f of run.finished) expect(f.cpuTierHitTokens, f.id).toBe(0);
      // The tokens of the failed loads were computed once, for the first time: no preemption, nothing again.
      expect(m.preemptions).toBe(0);
      expect(m.tokens.recomputed).toBe(0);
      expect(m.hits.gpuPrefixTokens + m.tokens.prefillComputed).toBe(m.tokens.prompt);
      await expectIdle(engine);
    });
  });

  it('a block-aligned prompt served wholly by the tiers counts its last token as computed, not as a hit', async () => {
    await withFailingEngine({ ...SMALL_GPU, tp: 2 }, async (engine) => {
      // Sixteen prompts of 128 tokens, eight 16-token blocks each; the second eight are the first eight again.
      const run = await runUntilStopped(engine, evictThenReuse());
      expectCorrectOutputs(run.finished, 16);
      const m = await expectTokenIdentity(engine, run.finished);
      expect(m.hits.cpuTierTokens).toBeGreaterThan(0);
      for (const f of run.finished.filter((r) => r.id.startsWith('again'))) {
        expect(f.gpuPrefixHitTokens + f.cpuTierHitTokens, f.id).toBe(127);
      }
      expect(m.tokens.recomputed).toBe(0);
      expect(m.hits.gpuPrefixTokens + m.hits.cpuTierTokens + m.tokens.prefillComputed).toBe(m.tokens.prompt);
      expect(m.tokens.prompt).toBe(2048);
    });
  });
});
