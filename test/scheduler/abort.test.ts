import { describe, expect, it } from 'vitest';
import type { SchedulerConnector } from '../../src/scheduler/connector-port.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { Harness, outputWith, promptOf, requestFor, SeededTierConnector, tinyConfig } from './helpers.js';

/** A connector whose stores still read every finished request's blocks until finishedSending says otherwise. */
function storesInFlight(): SchedulerConnector {
  return {
    getNumNewMatchedTokens: () => ({ numTokens: 0, loadAsync: false }),
    updateStateAfterAlloc: () => null,
    buildConnectorMeta: (step) => ({ flushReqIds: step.preemptedReqIds, stores: [], loads: [] }),
    updateConnectorOutput: () => {},
    requestFinished: () => true,
    hasPendingWork: () => false,
    reset: () => {},
  };
}

describe('aborting requests', () => {
  it('aborts a waiting request before it ever runs', async () => {
    const h = new Harness();
    h.add('w', { prompt: promptOf(5, 1), maxTokens: 3 });
    expect(h.scheduler.abortRequest('w')).toBe(true);
    const { scheduled } = await h.step();
    expect(scheduled.requests).toHaveLength(0);
    expect(scheduled.finishedReqIds).toEqual(['w']);
    expect(h.scheduler.hasPendingWork()).toBe(false);
  });

  it('aborts a running request, frees its blocks and ignores the token of its step in flight', async () => {
    const h = new Harness();
    h.add('r', { prompt: promptOf(9, 2), maxTokens: 5 });
    const scheduled = h.scheduler.schedule();
    const result = await h.ranks.execute(scheduled);
    expect(h.scheduler.abortRequest('r')).toBe(true);
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(h.scheduler.updateFromOutput(scheduled, result)).toEqual([]);
    expect(h.scheduler.schedule().finishedReqIds).toEqual(['r']);
    expect(h.scheduler.stats()).toMatchObject({ requestsAborted: 1, running: 0 });
  });

  it('aborts a preempted request waiting to resume', async () => {
    const h = new Harness({ config: { numGpuBlocks: 5, maxModelLen: 20 } });
    h.add('x', { prompt: promptOf(8, 1), maxTokens: 4, arrivalTime: 0 });
    h.add('y', { prompt: promptOf(8, 2), maxTokens: 4, arrivalTime: 1 });
    await h.step();
    await h.step();
    expect(h.scheduler.getRequest('y')!.status).toBe('preempted');
    expect(h.scheduler.abortRequest('y')).toBe(true);
    expect(h.scheduler.waitingIds()).toEqual([]);
    await h.runUntilIdle();
    expect(h.outputs.get('x')).toEqual(h.expectedTokens('x'));
  });

  it('reports a loading request aborted at once but keeps its blocks until its load finished', async () => {
    const h = new Harness({ connector: (ranks) => new SeededTierConnector(ranks), loadLatencySteps: 3 });
    const tier = h.connector as SeededTierConnector;
    const prefix = promptOf(12, 3);
    tier.seed(prefix);
    h.add('loader', { prompt: [...prefix, 1], maxTokens: 2 });
    await h.step(); // step 0 issues the load; it lands in step 3
    h.add('sharer', { prompt: [...prefix, 2, 3], maxTokens: 2 });
    await h.step(); // the sharer waits on the same load
    expect(h.scheduler.abortRequest('loader')).toBe(true);
    expect((await h.step()).scheduled.finishedReqIds).toEqual(['loader']);
    const loadBlocks = tier.issuedLoads[0].gpuBlockIds;
    const pool = h.scheduler.kvCacheManager.pool;
    // Still written by the load: held by the aborted loader and by the sharer.
    expect(loadBlocks.map((id) => pool.block(id).refCnt)).toEqual([2, 2, 2]);
    await h.step(); // step 3: the load lands and the loader's hold ends
    expect(loadBlocks.map((id) => pool.block(id).refCnt)).toEqual([1, 1, 1]);
    await h.runUntilIdle();
    expect(h.outputs.get('loader')).toEqual([]);
    expect(h.outputs.get('sharer')).toEqual(h.expectedTokens('sharer'));
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(pool.checkConsistency()).toEqual([]);
  });

  it('keeps a finished request\'s blocks while the connector\'s stores still read them', async () => {
    const scheduler = new Scheduler(tinyConfig(), { connector: storesInFlight() });
    scheduler.addRequest(requestFor(scheduler, 's', { prompt: promptOf(6, 4), maxTokens: 3 }));
    const step = scheduler.schedule();
    scheduler.updateFromOutput(step, outputWith(step, [['s', 11]]));
    expect(scheduler.abortRequest('s')).toBe(true);
    expect(scheduler.stats()).toMatchObject({ finishedHoldingBlocks: 1 });
    expect(scheduler.stats().kvCache.referenced).toBe(2);
    expect(scheduler.hasPendingWork()).toBe(true);
    const next = scheduler.schedule();
    scheduler.updateFromOutput(next, outputWith(next, [], { finishedSending: new Set(['s']) }));
    expect(scheduler.stats().kvCache.referenced).toBe(0);
    expect(scheduler.hasPendingWork()).toBe(false);
  });

  it('does nothing for a finished or unknown request', async () => {
    const h = new Harness();
    h.add('done', { prompt: promptOf(3, 5), maxTokens: 1 });
    await h.runUntilIdle();
    expect(h.scheduler.abortRequest('done')).toBe(false);
    expect(h.scheduler.abortRequest('never-added')).toBe(false);
  });
});
