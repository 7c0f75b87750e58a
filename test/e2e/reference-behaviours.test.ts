import { describe, expect, it } from 'vitest';
import { probe, withSwitches, type TransferLogEntry, type WorkerConnectorSwitches } from '../../src/testing/index.js';
import type { EngineConfigInput, FinishedRequest, RequestSpec } from '../../src/runtime/engine-types.js';
import { mismatches, runWaves, tokens, withEngine } from './helpers.js';

/**
 * Each reference behaviour of the step protocol keeps outputs correct; these
 * scenarios run once as built and once with the behaviour switched off by a
 * test-only switch, and the second run must go wrong.
 */

interface Outcome {
  readonly finished: FinishedRequest[];
  readonly wrong: string[];
  readonly preemptions: number;
  readonly cpuTierHitTokens: number;
  /** CPU-tier tokens read again by requests that had reached them before (a preempted request resuming). */
  readonly cpuTierRereadTokens: number;
  readonly logs: TransferLogEntry[][];
}

async function run(config: EngineConfigInput, waves: RequestSpec[][], worker: WorkerConnectorSwitches = {}): Promise<Outcome> {
  return withEngine(
    config,
    async (engine) => {
      const finished = await runWaves(engine, waves);
      const m = engine.metrics();
      return {
        finished,
        wrong: mismatches(finished),
        preemptions: m.preemptions,
        cpuTierHitTokens: m.hits.cpuTierTokens,
        cpuTierRereadTokens: m.rereads.cpuTierTokens,
        logs: await probe(engine).transferLogs(),
      };
    },
    withSwitches({ worker: { recordTransfers: true, ...worker } }),
  );
}

/** Decoding requests in a pool too small for them: they preempt each other and resume from the CPU tier. */
function preemptionStorm(): RequestSpec[][] {
  return [
    Array.from({ length: 8 }, (_, i) => ({
      id: `storm${i}`,
      promptTokens: tokens(300 + i, 60 + 8 * i),
      maxTokens: 40,
      seed: i,
    })),
  ];
}

/** Prompts computed once, pushed out of a small GPU pool, then asked again (served from the CPU tier). */
function evictThenReuse(): RequestSpec[][] {
  const prompts = Array.from({ length: 8 }, (_, i) => tokens(700 + i, 128));
  return [
    prompts.map((p, i) => ({ id: `first${i}`, promptTokens: p, maxTokens: 4, seed: i })),
    prompts.map((p, i) => ({ id: `again${i}`, promptTokens: p, maxTokens: 4, seed: 10 + i })),
  ];
}

/** Stores (except flushes) that were submitted in the step that issued them instead of the next one. */
function storesNotDeferred(logs: readonly TransferLogEntry[][]): TransferLogEntry[] {
  return logs.flat().filter((e) => e.direction === 'gpuToCpu' && e.submittedStep <= e.issuedStep);
}

describe('preemption flush', () => {
  // Stores run 30 ms late, so a store that is not waited for reads its blocks after they were reused.
  const config: EngineConfigInput = { tp: 2, gpuBlocks: 20, cpuBlocks: 512, maxNumSeqs: 8, computeNsPerToken: 2_000, faults: 'delay:ms=30' };

  it("a preempted request's stores are flushed before its blocks are reused, so it resumes from the CPU tier correctly", async () => {
    const outcome = await run(config, preemptionStorm());
    expect(outcome.preemptions).toBeGreaterThan(0);
    // The preempted requests read their own stored blocks back: rereads, not hits.
    expect(outcome.cpuTierRereadTokens).toBeGreaterThan(0);
    expect(outcome.wrong).toEqual([]);
  });

  it('without the flush the reused blocks are stored under the preempted request and its outputs diverge', async () => {
    const outcome = await run(config, preemptionStorm(), { skipPreemptionFlush: true });
    expect(outcome.preemptions).toBeGreaterThan(0);
    expect(outcome.wrong.length).toBeGreaterThan(0);
  });
});

describe('stores wait for compute', () => {
  // Compute takes long enough (and runs before the KV writes) that an unordered copy reads old data.
  const config: EngineConfigInput = { tp: 2, gpuBlocks: 24, cpuBlocks: 512, maxNumSeqs: 2, computeNsPerToken: 60_000 };

  it('a store copies a block only after the compute that wrote it, so CPU-tier hits give the right tokens', async () => {
    const outcome = await run(config, evictThenReuse());
    expect(outcome.cpuTierHitTokens).toBeGreaterThan(0);
    expect(outcome.wrong).toEqual([]);
  });

  it('a store not ordered after compute captures stale KV and the requests served from it diverge', async () => {
    const outcome = await run(config, evictThenReuse(), { storesIgnoreCompute: true, submitStoresImmediately: true });
    expect(outcome.cpuTierHitTokens).toBeGreaterThan(0);
    expect(outcome.wrong.length).toBeGreaterThan(0);
  });
});

describe('stores are deferred to the next step', () => {
  const config: EngineConfigInput = { tp: 2, gpuBlocks: 24, cpuBlocks: 512, maxNumSeqs: 2, computeNsPerToken: 2_000 };

  it("each step's stores are submitted at the start of the next step", async () => {
    const outcome = await run(config, evictThenReuse());
    expect(outcome.logs.flat().some((e) => e.direction === 'gpuToCpu')).toBe(true);
    expect(storesNotDeferred(outcome.logs)).toEqual([]);
    expect(outcome.wrong).toEqual([]);
  });

  it('submitting stores in the step that computed them is caught by the ordering check, though outputs stay right', async () => {
    const outcome = await run(config, evictThenReuse(), { submitStoresImmediately: true });
    expect(storesNotDeferred(outcome.logs).length).toBeGreaterThan(0);
    expect(outcome.wrong).toEqual([]);
  });
});
