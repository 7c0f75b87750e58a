import { describe, expect, it } from 'vitest';
import { Harness, promptOf, referenceTokens, Rng, SeededTierConnector, type RequestSketch } from './helpers.js';

const MAX_MODEL_LEN = 64;

interface Workload {
  readonly h: Harness;
  readonly rng: Rng;
  readonly prefixes: number[][];
  readonly live: Set<string>;
  readonly aborted: Set<string>;
  nextId: number;
}

/** A prompt that often starts with one of the shared prefixes (whole or cut), then a random suffix. */
function randomSketch(w: Workload): RequestSketch {
  const { rng } = w;
  const head = rng.chance(0.7) ? rng.pick(w.prefixes).slice(0, rng.nextInt(1, 24)) : [];
  const suffix = promptOf(rng.nextInt(1, 16), rng.nextInt(0, 1 << 30));
  const prompt = [...head, ...suffix].slice(0, MAX_MODEL_LEN - 1);
  const maxTokens = rng.nextInt(1, Math.min(16, MAX_MODEL_LEN - prompt.length));
  const seed = rng.nextInt(0, 0xffffffff);
  let stopToken: number | null = null;
  if (rng.chance(0.2)) {
    // A stop token the reference really produces, so stopping is exercised.
    const tokens = referenceTokens({ prompt, maxTokens, seed });
    stopToken = rng.pick(tokens);
  }
  return { prompt, maxTokens, seed, stopToken, arrivalTime: w.nextId };
}

async function drive(w: Workload, steps: number, extra: (step: number) => void | Promise<void> = () => {}): Promise<void> {
  for (let step = 0; step < steps; step++) {
    if (w.rng.chance(0.35)) {
      const id = `r${w.nextId}`;
      w.h.add(id, randomSketch(w));
      w.nextId++;
      w.live.add(id);
    }
    if (w.live.size > 0 && w.rng.chance(0.02)) {
      const id = w.rng.pick([...w.live]);
      if (w.h.scheduler.abortRequest(id)) w.aborted.add(id);
    }
    await extra(step);
    await w.h.step();
    if (step % 25 === 0) expect(w.h.scheduler.kvCacheManager.pool.checkConsistency()).toEqual([]);
    for (const id of w.h.finishReasons.keys()) w.live.delete(id);
    for (const id of w.aborted) w.live.delete(id);
  }
  await w.h.runUntilIdle();
}

function expectEveryRequestMatchesTheReference(w: Workload): void {
  let finished = 0;
  for (const [id, sketch] of w.h.sketches) {
    const expected = referenceTokens(sketch);
    const got = w.h.outputs.get(id) as number[];
    if (w.aborted.has(id)) {
      expect(got, `aborted ${id}`).toEqual(expected.slice(0, got.length));
    } else {
      expect(w.h.finishReasons.get(id), `finish reason of ${id}`).toMatch(/^(length|stopped)$/);
      expect(got, `tokens of ${id}`).toEqual(expected);
      finished++;
    }
  }
  expect(finished).toBeGreaterThan(100);
}

function expectEveryBlockFree(w: Workload): void {
  const { scheduler } = w.h;
  const pool = scheduler.kvCacheManager.pool;
  expect(scheduler.hasPendingWork()).toBe(false);
  expect(pool.checkConsistency()).toEqual([]);
  expect(pool.counts()).toMatchObject({ free: pool.numBlocks, referenced: 0, pending: 0 });
  for (let id = 0; id < pool.numBlocks; id++) expect(pool.block(id).refCnt).toBe(0);
  expect(scheduler.kvCacheManager.numTables).toBe(0);
}

function workload(h: Harness, seed: number): Workload {
  const rng = new Rng(seed);
  const prefixes = [0, 1, 2, 3].map((k) => promptOf(24, 900 + k));
  return { h, rng, prefixes, live: new Set(), aborted: new Set(), nextId: 0 };
}

describe('randomized workloads on a tiny block pool', () => {
  it('produces the reference tokens for every request through prefix hits, chunking, preemption and aborts', async () => {
    const h = new Harness({
      config: { numGpuBlocks: 24, maxNumBatchedTokens: 24, maxNumSeqs: 6, maxModelLen: MAX_MODEL_LEN },
    });
    const w = workload(h, 12345);
    await drive(w, 3000);
    expectEveryRequestMatchesTheReference(w);
    expectEveryBlockFree(w);
    const stats = h.scheduler.stats();
    expect(stats.preemptions).toBeGreaterThan(0);
    expect(stats.gpuPrefixHitTokens).toBeGreaterThan(0);
  });

  it('also does so with CPU-tier loads that land late, share blocks, fail, and a rank lost now and then', async () => {
    const rngFaults = new Rng(777);
    const h = new Harness({
      config: { numGpuBlocks: 24, maxNumBatchedTokens: 24, maxNumSeqs: 6, maxModelLen: MAX_MODEL_LEN },
      connector: (ranks) => new SeededTierConnector(ranks),
      loadLatencySteps: 2,
      loadFaults: (job) => job.gpuBlockIds.filter(() => rngFaults.chance(0.08)),
    });
    const tier = h.connector as SeededTierConnector;
    const w = workload(h, 4242);
    const seedTier = () => w.prefixes.forEach((p) => tier.seed(p));
    seedTier();
    await drive(w, 3000, async (step) => {
      // Aborts while loading are the delicate case: the load still writes the blocks.
      const loading = [...w.live].filter((id) => h.scheduler.getRequest(id)?.status === 'waitingForCpuTierLoad');
      if (loading.length > 0 && w.rng.chance(0.1)) {
        const id = w.rng.pick(loading);
        if (h.scheduler.abortRequest(id)) w.aborted.add(id);
      }
      if (step > 0 && step % 1000 === 0) {
        await h.loseRanks();
        seedTier();
      }
    });
    expectEveryRequestMatchesTheReference(w);
    expectEveryBlockFree(w);
    const stats = h.scheduler.stats();
    expect(stats.cpuTierHitTokens).toBeGreaterThan(0);
    expect(stats.loadFailures.requestsRecovered).toBeGreaterThan(0);
    expect(stats.rankResets).toBe(2);
  });
});
