import { describe, expect, it } from 'vitest';
import type { SchedulerTestOnlyOptions } from '../../src/testing/index.js';
import type { LoadFaultInjector } from '../../src/sim/simulated-ranks.js';
import { Harness, promptOf, referenceTokens, SeededTierConnector } from './helpers.js';

/** Fails the blocks at `indices` of every load issued for request `reqId`. */
function failLoadOf(reqId: string, indices: number[]): LoadFaultInjector {
  return (job) => (job.reqId === reqId ? indices.map((i) => job.gpuBlockIds[i]) : []);
}

interface ScenarioOptions {
  readonly loadAsync?: boolean;
  readonly loadLatencySteps?: number;
  readonly loadFaults?: LoadFaultInjector;
  readonly failurePolicy?: 'recompute' | 'fail';
  readonly testOnly?: SchedulerTestOnlyOptions;
}

function tierHarness(options: ScenarioOptions) {
  const h = new Harness({
    config: { failurePolicy: options.failurePolicy ?? 'recompute' },
    schedulerOptions: { testOnly: options.testOnly },
    connector: (ranks) => new SeededTierConnector(ranks, { loadAsync: options.loadAsync ?? true }),
    loadLatencySteps: options.loadLatencySteps ?? 1,
    loadFaults: options.loadFaults,
  });
  return { h, tier: h.connector as SeededTierConnector };
}

const PREFIX_A = promptOf(12, 101);
const PREFIX_C = promptOf(12, 103);

/** a and c load their prefixes from the tier while b computes; the second block of a's load fails. */
async function asyncFailureScenario(testOnly?: SchedulerTestOnlyOptions) {
  const { h, tier } = tierHarness({ loadFaults: failLoadOf('a', [1]), testOnly });
  tier.seed(PREFIX_A);
  tier.seed(PREFIX_C);
  h.add('a', { prompt: [...PREFIX_A, 1, 2], maxTokens: 4 });
  h.add('b', { prompt: promptOf(10, 102), maxTokens: 4 });
  h.add('c', { prompt: [...PREFIX_C, 3], maxTokens: 4 });
  await h.step(); // step 0: loads issued, b prefills
  await h.step(); // step 1: both loads land, a's with one failed block
  const afterFailure = {
    a: h.scheduler.getRequest('a')!.numComputedTokens,
    c: h.scheduler.getRequest('c')!.numComputedTokens,
    failedBlock: tier.loadsFor('a')[0].gpuBlockIds[1],
    failedHashCached: h.scheduler.kvCacheManager.pool.getCachedBlock(h.scheduler.getRequest('a')!.blockHashes[1]),
  };
  await h.runUntilIdle();
  return { h, tier, afterFailure };
}

/** a loads its prefix synchronously and samples in the same step; the second loaded block fails. */
async function syncFailureScenario(options: { stopToken?: number; testOnly?: SchedulerTestOnlyOptions } = {}) {
  const { h } = tierHarness({ loadAsync: false, loadFaults: failLoadOf('a', [1]), testOnly: options.testOnly });
  (h.connector as SeededTierConnector).seed(PREFIX_A);
  h.add('a', { prompt: [...PREFIX_A, 9], maxTokens: 4, stopToken: options.stopToken ?? null });
  const first = await h.step();
  const afterFailure = {
    status: h.scheduler.getRequest('a')?.status,
    computed: h.scheduler.getRequest('a')?.numComputedTokens,
    sampledThatStep: h.results[0].sampledTokens[h.steps[0].requests.findIndex((r) => r.reqId === 'a')],
    updates: first.updates,
  };
  await h.runUntilIdle();
  return { h, afterFailure };
}

describe('failed loads: recompute', () => {
  it('truncates only the request whose asynchronous load failed, to the start of the failed block', async () => {
    const { h, afterFailure } = await asyncFailureScenario();
    expect(afterFailure.a).toBe(4);
    expect(afterFailure.c).toBe(12);
    for (const id of ['a', 'b', 'c']) expect(h.outputs.get(id)).toEqual(h.expectedTokens(id));
    expect(h.scheduler.stats().loadFailures).toEqual({ blocks: 1, requestsRecovered: 1, requestsFailed: 0 });
  });

  it('takes a failed block out of the prefix cache at once', async () => {
    const { afterFailure } = await asyncFailureScenario();
    expect(afterFailure.failedHashCached).toBeNull();
  });

  it('keeps a request using a failed block in the same step running, truncated, and drops its token', async () => {
    const { h, afterFailure } = await syncFailureScenario();
    expect(afterFailure.status).toBe('running');
    expect(afterFailure.computed).toBe(4);
    expect(afterFailure.updates).toEqual([]);
    expect(h.outputs.get('a')).toEqual(h.expectedTokens('a'));
  });

  it('drops a token sampled from failed KV even when it is the stop token', async () => {
    const pilot = await syncFailureScenario({ testOnly: { keepTokensSampledFromInvalidKv: true } });
    const poisoned = pilot.afterFailure.sampledThatStep as number;
    const sketch = { prompt: [...PREFIX_A, 9], maxTokens: 4, stopToken: poisoned };
    expect(referenceTokens(sketch)).not.toContain(poisoned);
    const { h } = await syncFailureScenario({ stopToken: poisoned });
    expect(h.outputs.get('a')).toEqual(referenceTokens(sketch));
    expect(h.finishReasons.get('a')).toBe('length');
  });

  it('truncates each request sharing a failed block through the prefix cache to its own first failed block', async () => {
    const { h, tier } = tierHarness({ loadAsync: false, loadFaults: failLoadOf('a', [1]) });
    tier.seed(PREFIX_A);
    h.add('a', { prompt: [...PREFIX_A, 1], maxTokens: 3 });
    h.add('b', { prompt: [...PREFIX_A.slice(0, 8), ...promptOf(5, 7)], maxTokens: 3 }); // shares blocks 0-1
    h.add('c', { prompt: [...PREFIX_A.slice(0, 4), ...promptOf(5, 8)], maxTokens: 3 }); // shares block 0
    const { scheduled } = await h.step();
    expect(scheduled.requests.map((r) => [r.reqId, r.startPosition])).toEqual([
      ['a', 12],
      ['b', 8],
      ['c', 4],
    ]);
    expect(h.scheduler.getRequest('a')!.numComputedTokens).toBe(4);
    expect(h.scheduler.getRequest('b')!.numComputedTokens).toBe(4);
    expect(h.outputs.get('c')).toHaveLength(1);
    await h.runUntilIdle();
    for (const id of ['a', 'b', 'c']) expect(h.outputs.get(id)).toEqual(h.expectedTokens(id));
    expect(h.scheduler.stats().loadFailures.requestsRecovered).toBe(2);
  });

  it('keeps the lowest invalid block when failures are reported over several steps, in either order', async () => {
    for (const order of [
      [3, 1],
      [1, 3],
    ]) {
      const { h, tier } = tierHarness({ loadLatencySteps: 3, loadFaults: failLoadOf('a', [1, 3]) });
      tier.seed(PREFIX_A.concat(promptOf(4, 55)));
      h.add('a', { prompt: [...PREFIX_A, ...promptOf(4, 55), 1], maxTokens: 3 });
      await h.step(); // step 0: the load of four blocks is issued
      const load = tier.loadsFor('a')[0];
      const computed: number[] = [];
      for (const index of order) {
        // One rank reports its failed block before the job finished everywhere.
        await h.stepWithOutput((output) => ({ ...output, invalidBlockIds: new Set([load.gpuBlockIds[index]]) }));
        computed.push(h.scheduler.getRequest('a')!.numComputedTokens);
      }
      expect(computed).toEqual(order[0] === 3 ? [12, 4] : [4, 4]);
      await h.runUntilIdle();
      expect(h.outputs.get('a')).toEqual(h.expectedTokens('a'));
    }
  });
});

describe("failed loads: policy 'fail'", () => {
  it('ends exactly the requests using a failed block, with an error naming it', async () => {
    const { h, tier } = tierHarness({ failurePolicy: 'fail', loadLatencySteps: 2, loadFaults: failLoadOf('a', [1]) });
    tier.seed(PREFIX_A);
    h.add('a', { prompt: [...PREFIX_A, 1], maxTokens: 3 });
    h.add('b', { prompt: promptOf(9, 5), maxTokens: 3 });
    await h.step();
    h.add('sharer', { prompt: [...PREFIX_A, 2, 3], maxTokens: 3 }); // waits on a's load
    h.add('prefix-only', { prompt: [...PREFIX_A.slice(0, 4), 4, 5], maxTokens: 3 }); // hits block 0 only
    await h.runUntilIdle();
    const failedBlock = tier.loadsFor('a')[0].gpuBlockIds[1];
    expect(h.finishReasons.get('a')).toBe('error');
    expect(h.finishReasons.get('sharer')).toBe('error');
    expect(h.errors.get('a')).toContain(`KV load failed for GPU block ${failedBlock}`);
    expect(h.outputs.get('a')).toEqual([]);
    for (const id of ['b', 'prefix-only']) expect(h.outputs.get(id)).toEqual(h.expectedTokens(id));
    expect(h.scheduler.stats().loadFailures).toEqual({ blocks: 1, requestsRecovered: 0, requestsFailed: 2 });
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
  });
});

/** Under 'fail', a's load fails; a later request with the same prompt must not hit the poisoned block. */
async function laterRequestAfterFailure(testOnly?: SchedulerTestOnlyOptions) {
  const { h, tier } = tierHarness({ failurePolicy: 'fail', loadFaults: failLoadOf('a', [1]), testOnly });
  tier.seed(PREFIX_A);
  h.add('a', { prompt: [...PREFIX_A, 1], maxTokens: 3 });
  await h.runUntilIdle();
  tier.reset(); // the later request can only use the GPU prefix cache
  h.add('later', { prompt: [...PREFIX_A, 1], maxTokens: 3 });
  await h.runUntilIdle();
  return h;
}

describe('failed loads: invalid blocks leave the prefix cache', () => {
  it('gives a later request with the same prompt the reference tokens', async () => {
    const h = await laterRequestAfterFailure();
    expect(h.finishReasons.get('a')).toBe('error');
    expect(h.outputs.get('later')).toEqual(h.expectedTokens('later'));
  });
});

describe('failed-load recovery: each behaviour matters (sensitivity)', () => {
  it('without truncation, the request whose load failed produces wrong tokens', async () => {
    const { h } = await asyncFailureScenario({ skipInvalidBlockRecovery: true });
    expect(h.outputs.get('a')).not.toEqual(h.expectedTokens('a'));
  });

  it('without uncaching, the failed block stays cached and a later request hitting it goes wrong', async () => {
    const { afterFailure } = await asyncFailureScenario({ keepInvalidBlocksCached: true });
    expect(afterFailure.failedHashCached?.id).toBe(afterFailure.failedBlock);
    const h = await laterRequestAfterFailure({ keepInvalidBlocksCached: true });
    expect(h.outputs.get('later')).not.toEqual(h.expectedTokens('later'));
  });

  it('without dropping, a token sampled from failed KV ends up in the output', async () => {
    const { h } = await syncFailureScenario({ testOnly: { keepTokensSampledFromInvalidKv: true } });
    expect(h.outputs.get('a')).not.toEqual(h.expectedTokens('a'));
  });
});
