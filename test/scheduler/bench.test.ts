import { describe, expect, it } from 'vitest';
import { runSchedulerBench } from '../../src/bench/scheduler.js';
import type { SchedulerConnector } from '../../src/scheduler/connector-port.js';

/** A connector that matches nothing and counts the steps it was asked to describe. */
function countingConnector(): SchedulerConnector & { steps: number } {
  const connector = {
    steps: 0,
    getNumNewMatchedTokens: () => ({ numTokens: 0, loadAsync: false }),
    updateStateAfterAlloc: () => null,
    buildConnectorMeta: (step: { preemptedReqIds: readonly string[] }) => {
      connector.steps++;
      return { flushReqIds: step.preemptedReqIds, stores: [], loads: [] };
    },
    updateConnectorOutput: () => {},
    requestFinished: () => false,
    hasPendingWork: () => false,
    reset: () => {},
  };
  return connector;
}

describe('scheduler bench', () => {
  it('measures one row per running-request count, every request decoding one token per step', async () => {
    const rows = await runSchedulerBench({ runningRequests: [4, 16], steps: 5, warmupSteps: 1, promptTokens: 8 });
    expect(rows.map((r) => [r.runningRequests, r.steps, r.tokensPerStep, r.withConnector])).toEqual([
      [4, 5, 4, false],
      [16, 5, 16, false],
    ]);
    for (const row of rows) {
      expect(row.wallUsPerStep).toBeGreaterThan(0);
      expect(row.usPerRequestStep).toBeCloseTo(row.usPerStep / row.runningRequests);
    }
  });

  it('reads the heap bytes per request of the decode steps that complete no block, and none without probe steps', async () => {
    const [probed] = await runSchedulerBench({ runningRequests: [64], steps: 4, warmupSteps: 40, promptTokens: 8, repeats: 1, warmupRun: false });
    expect(probed.allocBytesPerRequestStep).not.toBeNull();
    expect(probed.allocBytesPerRequestStep).toBeGreaterThanOrEqual(0);
    const [unprobed] = await runSchedulerBench({
      runningRequests: [4],
      steps: 2,
      warmupSteps: 1,
      promptTokens: 4,
      repeats: 1,
      warmupRun: false,
      allocationProbeSteps: 0,
    });
    expect(unprobed.allocBytesPerRequestStep).toBeNull();
  });

  it('runs the scheduler with the connector it is given', async () => {
    const connector = countingConnector();
    let stepsBeforeFirst = -1;
    const [row] = await runSchedulerBench({
      runningRequests: [8],
      steps: 3,
      warmupSteps: 2,
      promptTokens: 4,
      warmupRun: false,
      repeats: 1,
      allocationProbeSteps: 4,
      connector: () => connector,
      onSchedulerCreated: (scheduler) => (stepsBeforeFirst = scheduler.stats().steps),
    });
    expect(row.withConnector).toBe(true);
    expect(stepsBeforeFirst).toBe(0);
    // Prefill, warm-up, timed, then the untimed steps whose allocation is read.
    expect(connector.steps).toBe(1 + 2 + 3 + 4);
  });

  it('first runs the first size once, untimed, then measures each size `repeats` times on fresh schedulers', async () => {
    const connectors: ReturnType<typeof countingConnector>[] = [];
    const rows = await runSchedulerBench({
      runningRequests: [8, 4],
      steps: 3,
      warmupSteps: 2,
      promptTokens: 4,
      repeats: 2,
      allocationProbeSteps: 0,
      connector: () => {
        connectors.push(countingConnector());
        return connectors[connectors.length - 1];
      },
    });
    expect(rows.map((r) => [r.runningRequests, r.repeats])).toEqual([
      [8, 2],
      [4, 2],
    ]);
    // The warm-up run, then two measurements per size, each stepping 1 prefill + 2 warm-up + 3 timed steps.
    expect(connectors.map((c) => c.steps)).toEqual(Array(5).fill(1 + 2 + 3));
  });

  it('with metrics, alternates blocks of steps without and with the monitor and registry on one scheduler, and reports the overhead against the steps without', async () => {
    const rows = await runSchedulerBench({
      runningRequests: [8, 4],
      steps: 6,
      warmupSteps: 2,
      promptTokens: 4,
      blockSize: 2,
      repeats: 1,
      withMetrics: true,
      scrapeEverySteps: 3,
    });
    expect(rows.map((r) => r.steps)).toEqual([6, 6, 6, 6]);
    expect(rows.map((r) => [r.runningRequests, r.withMetrics])).toEqual([
      [8, false],
      [8, true],
      [4, false],
      [4, true],
    ]);
    expect(rows[0].metricsOverhead).toBeNull();
    expect(rows[1].metricsOverhead).toBeCloseTo(rows[1].usPerStep / rows[0].usPerStep - 1, 10);
    expect(rows[3].metricsOverhead).toBeCloseTo(rows[3].usPerStep / rows[2].usPerStep - 1, 10);
    expect(rows[1].monitoringUsPerStep).toBeGreaterThan(0);
    expect(rows[1].monitoringShare).toBeCloseTo(rows[1].monitoringUsPerStep! / rows[0].usPerStep, 10);
    expect(rows[0].monitoringUsPerStep).toBeNull();
  });

  it('rejects a request count that is not a positive integer', async () => {
    await expect(runSchedulerBench({ runningRequests: [0] })).rejects.toThrow(/runningRequests entry 0/);
  });
});
