import { describe, expect, it } from 'vitest';
import type { LoadFaultInjector } from '../../src/sim/simulated-ranks.js';
import { Harness, promptOf, SeededTierConnector } from './helpers.js';

/**
 * With several ranks, a failed block of a load is reported by each rank in
 * its own step: the fastest rank reports it while the others are still
 * loading, and the job completes (with the same failed block) only when the
 * slowest rank is done. The scheduler acts on the first report, and counts
 * each failed block and each recovered request once.
 */

/** Fails the blocks at `indices` of every load issued for request `reqId`. */
function failLoadOf(reqId: string, indices: number[]): LoadFaultInjector {
  return (job) => (job.reqId === reqId ? indices.map((i) => job.gpuBlockIds[i]) : []);
}

const PREFIX = promptOf(12, 101);

/** A harness whose loads take three steps, a's load failing at the given block indices. */
function slowLoads(failurePolicy: 'recompute' | 'fail', failedIndices: number[]) {
  const h = new Harness({
    config: { failurePolicy },
    connector: (ranks) => new SeededTierConnector(ranks, { loadAsync: true }),
    loadLatencySteps: 3,
    loadFaults: failLoadOf('a', failedIndices),
  });
  return { h, tier: h.connector as SeededTierConnector };
}

/** One step in which a fast rank reports `blockIds` failed before the load completed on every rank. */
async function stepWithEarlyReport(h: Harness, blockIds: number[]): Promise<void> {
  await h.stepWithOutput((output) => ({ ...output, invalidBlockIds: new Set(blockIds) }));
}

describe('a failed block reported by one rank before the others finished the load', () => {
  it("leaves the prefix cache at that first report, so a request admitted before the slow rank's report never reads it", async () => {
    const { h, tier } = slowLoads('fail', [1]);
    tier.seed(PREFIX);
    h.add('a', { prompt: [...PREFIX, 1], maxTokens: 3 });
    await h.step(); // step 0: a's load of three blocks is issued
    const failedBlock = tier.loadsFor('a')[0].gpuBlockIds[1];
    await stepWithEarlyReport(h, [failedBlock]); // step 1 (N): the fast rank reports block 1 failed
    expect(h.finishReasons.get('a')).toBe('error');
    // Step 2 (N + 1): a request sharing the whole prefix arrives; only the GPU prefix cache can serve it.
    tier.reset();
    h.add('sharer', { prompt: [...PREFIX, 2], maxTokens: 3 });
    await h.step();
    // Step 3 (N + 2): the slow rank completes the load, reporting the same block.
    await h.runUntilIdle();
    expect(h.finishReasons.get('sharer')).toBe('length');
    expect(h.outputs.get('sharer')).toEqual(h.expectedTokens('sharer'));
  });

  it('counts each failed block once and a request truncated by several reports once', async () => {
    const { h, tier } = slowLoads('recompute', [1, 3]);
    tier.seed(PREFIX.concat(promptOf(4, 55)));
    h.add('a', { prompt: [...PREFIX, ...promptOf(4, 55), 1], maxTokens: 3 });
    await h.step(); // step 0: a's load of four blocks is issued
    const load = tier.loadsFor('a')[0];
    await stepWithEarlyReport(h, [load.gpuBlockIds[3]]); // one rank reports block 3: a is truncated to 12 tokens
    await stepWithEarlyReport(h, [load.gpuBlockIds[1]]); // another reports block 1: a is truncated to 4 tokens
    await h.runUntilIdle(); // the load completes everywhere, with both blocks failed
    expect(h.outputs.get('a')).toEqual(h.expectedTokens('a'));
    expect(h.scheduler.stats().loadFailures).toEqual({ blocks: 2, requestsRecovered: 1, requestsFailed: 0 });
  });

  it("with two ranks whose loads take one and three steps, acts on the fast rank's report and completes the job at the slow rank's", async () => {
    const h = new Harness({
      tp: 2,
      config: { failurePolicy: 'fail' },
      connector: (ranks) => new SeededTierConnector(ranks, { loadAsync: true }),
      loadLatencySteps: [1, 3],
      loadFaults: failLoadOf('a', [1]),
    });
    const tier = h.connector as SeededTierConnector;
    tier.seed(PREFIX);
    h.add('a', { prompt: [...PREFIX, 1], maxTokens: 3 });
    await h.step(); // step 0: a's load of three blocks is issued on both ranks
    const failedBlock = tier.loadsFor('a')[0].gpuBlockIds[1];
    await h.step(); // step 1: rank 0 finished the load, rank 1 has not
    expect(h.results[1].invalidBlockIds).toEqual(new Set([failedBlock]));
    expect(h.results[1].finishedJobs).toEqual([]);
    expect(h.finishReasons.get('a')).toBe('error');
    tier.reset();
    h.add('sharer', { prompt: [...PREFIX, 2], maxTokens: 3 });
    await h.runUntilIdle();
    const completed = h.results.findIndex((r) => r.finishedJobs.some((j) => j.jobId === tier.loadsFor('a')[0].jobId));
    expect(completed).toBe(3);
    expect(h.outputs.get('sharer')).toEqual(h.expectedTokens('sharer'));
    expect(h.scheduler.stats().loadFailures).toEqual({ blocks: 1, requestsRecovered: 0, requestsFailed: 1 });
  });
});
