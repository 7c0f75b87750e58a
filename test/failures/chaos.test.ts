import { afterAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../src/runtime/engine.js';
import type { FinishedRequest } from '../../src/runtime/engine-types.js';
import { chaosRun, type ChaosRun } from './chaos-plan.js';
import { expectIdle, mismatches, runWaves, TINY, withFailingEngine } from './helpers.js';
import { probe } from '../../src/testing/index.js';

/**
 * Chaos: seeded random mixes of failed loads, failed stores, delays and (in
 * some runs) a rank crash with restart, on tp = 2 and 4, with small GPU pools
 * (preemption), shared prefixes and CPU-tier reloads. Every finished request
 * must equal the reference model, nothing may leak, and no run may outlive
 * its deadline.
 */

const SEEDS = Array.from({ length: 40 }, (_, i) => i + 1);
/** Wall-clock bound of one run (a hang fails the run instead of stalling the suite). */
const RUN_DEADLINE_MS = 20_000;

interface RunSummary {
  readonly seed: number;
  readonly tp: number;
  readonly loadBlocksFailed: number;
  readonly storesFailed: number;
  readonly jobsDelayed: number;
  readonly recovered: number;
  readonly rankRestarts: number;
  readonly preemptions: number;
  readonly steps: number;
  readonly mismatches: number;
}

const summaries: RunSummary[] = [];

async function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} exceeded its deadline of ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function runChaos(plan: ChaosRun): Promise<{ finished: FinishedRequest[]; summary: RunSummary }> {
  return withFailingEngine(plan.config, async (engine: Engine) => {
    const finished = await runWaves(engine, plan.waves);
    await expectIdle(engine);
    const faults = await probe(engine).faultStats();
    const m = engine.metrics();
    const summary: RunSummary = {
      seed: plan.seed,
      tp: plan.config.tp!,
      loadBlocksFailed: faults.reduce((n, f) => n + f.loadBlocksFailed, 0),
      storesFailed: faults.reduce((n, f) => n + f.storesFailed, 0),
      jobsDelayed: faults.reduce((n, f) => n + f.jobsDelayed, 0),
      recovered: m.loadFailures.requestsRecovered,
      rankRestarts: m.rankRestarts,
      preemptions: m.preemptions,
      steps: m.steps,
      mismatches: mismatches(finished).length,
    };
    return { finished, summary };
  });
}

describe('chaos: random faults on every rank position, small pools, shared prefixes', () => {
  afterAll(() => {
    const total = (key: keyof RunSummary): number => summaries.reduce((n, s) => n + s[key], 0);
    console.log(
      `chaos: ${summaries.length} runs, load blocks failed ${total('loadBlocksFailed')}, stores failed ${total('storesFailed')}, ` +
        `jobs delayed ${total('jobsDelayed')}, requests recovered ${total('recovered')}, rank restarts ${total('rankRestarts')}, ` +
        `preemptions ${total('preemptions')}, mismatches ${total('mismatches')}`,
    );
  });

  it.each(SEEDS)('seed %i: every request answers exactly and nothing leaks', async (seed) => {
    const plan = chaosRun(seed, TINY.vocabSize);
    const requests = plan.waves.flat().length;
    const { finished, summary } = await withDeadline(runChaos(plan), RUN_DEADLINE_MS, `chaos seed ${seed}`);
    summaries.push(summary);
    console.log(
      `seed ${seed} tp=${summary.tp} faults="${plan.config.faults}": injected load blocks ${summary.loadBlocksFailed}, ` +
        `stores ${summary.storesFailed}, delays ${summary.jobsDelayed}; recovered ${summary.recovered}; ` +
        `restarts ${summary.rankRestarts}; preemptions ${summary.preemptions}; steps ${summary.steps}; mismatches ${summary.mismatches}`,
    );
    expect(mismatches(finished)).toEqual([]);
    expect(finished.filter((f) => f.finishReason === 'length' || f.finishReason === 'stopped')).toHaveLength(requests);
  });
});
