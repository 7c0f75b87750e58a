import { describe, expect, it } from 'vitest';
import { groupIntoCopyJobs } from '../../src/connector/copy-jobs.js';
import type { WorkerConnectorSwitches } from '../../src/connector/worker-connector-switches.js';
import { WorkerConnector, type TransferLogEntry } from '../../src/connector/worker-connector.js';
import type { OffloadStepMetadata, TransferDirection, TransferJobSpec } from '../../src/protocol/step-protocol.js';
import { openTestDevice } from '../device/helpers.js';
import { HeldDevice } from './held-device.js';
import { OffloadHarness, promptOf } from './helpers.js';

/**
 * A rank sends the transfer jobs it submits together (a step's stores, its
 * loads, a flush) to its device as few copy jobs, and reports each job, and
 * each request, only when the copy job carrying it completed.
 */

function job(jobId: number, reqId: string, direction: TransferDirection, gpuBlockIds: number[], cpuBlockIds = gpuBlockIds): TransferJobSpec {
  return { jobId, reqId, direction, gpuBlockIds, cpuBlockIds, firstSubBlock: 0, fence: false };
}

function meta(stores: TransferJobSpec[], loads: TransferJobSpec[] = []): OffloadStepMetadata {
  return { flushReqIds: [], stores, loads };
}

/** Per step that submitted jobs of `direction`: the requests they served and the copy jobs that carried them, on one rank. */
function copyJobsPerStep(log: readonly TransferLogEntry[], direction: TransferDirection): { requests: number; copyJobs: number }[] {
  const steps = new Map<number, { requests: Set<string | null>; copyJobs: Set<number> }>();
  for (const entry of log) {
    if (entry.direction !== direction) continue;
    let step = steps.get(entry.submittedStep);
    if (step === undefined) steps.set(entry.submittedStep, (step = { requests: new Set(), copyJobs: new Set() }));
    step.requests.add(entry.reqId);
    step.copyJobs.add(entry.copyJobId);
  }
  return [...steps.values()].map((s) => ({ requests: s.requests.size, copyJobs: s.copyJobs.size }));
}

/** Three requests prefilled in one step over tp ranks, then served again from the CPU tier in one step. */
async function threeRequestsTwice(switches: WorkerConnectorSwitches, tp = 2): Promise<OffloadHarness> {
  const h = new OffloadHarness({ tp, switches: { recordTransfers: true, ...switches } });
  const prompts = [0, 1, 2].map((i) => promptOf(16, 60 + i));
  prompts.forEach((prompt, i) => h.add(`first-${i}`, { prompt, maxTokens: 2 }));
  await h.runUntilIdle();
  h.forgetGpuCache();
  prompts.forEach((prompt, i) => h.add(`again-${i}`, { prompt, maxTokens: 2, seed: 5 }));
  await h.runUntilIdle();
  return h;
}

describe('copy jobs: grouping', () => {
  const bytesPerBlock = 1 << 20;

  it('jobs submitted together go out as one copy job while they fit the largest copy job', () => {
    const specs = [job(1, 'a', 'gpuToCpu', [0, 1]), job(2, 'b', 'gpuToCpu', [5]), job(3, 'c', 'gpuToCpu', [9, 10])];
    expect(groupIntoCopyJobs(specs, bytesPerBlock, 5 * bytesPerBlock).map((g) => g.map((s) => s.jobId))).toEqual([[1, 2, 3]]);
  });

  it('jobs beyond the largest copy job go out as several, none over the limit and none split', () => {
    const specs = [job(1, 'a', 'gpuToCpu', [0, 1]), job(2, 'b', 'gpuToCpu', [2, 3]), job(3, 'c', 'gpuToCpu', [4, 5, 6, 7, 8]), job(4, 'd', 'gpuToCpu', [9])];
    const groups = groupIntoCopyJobs(specs, bytesPerBlock, 4 * bytesPerBlock);
    expect(groups.map((g) => g.map((s) => s.jobId))).toEqual([[1, 2], [3], [4]]);
  });

  it('a load that starts inside its first CPU block leads a copy job, and a repeated destination starts a new one', () => {
    const skipping: TransferJobSpec = { ...job(2, 'b', 'cpuToGpu', [4, 5, 6], [2, 3]), firstSubBlock: 1 };
    const specs = [job(1, 'a', 'cpuToGpu', [0, 1], [0]), skipping, job(3, 'c', 'cpuToGpu', [7, 8], [4]), job(4, 'd', 'cpuToGpu', [8, 9], [5])];
    expect(groupIntoCopyJobs(specs, bytesPerBlock).map((g) => g.map((s) => s.jobId))).toEqual([[1], [2, 3], [4]]);
  });
});

describe('copy jobs: what a rank sends', () => {
  it("a step's stores for several requests go out as one transfer job per rank", async () => {
    const h = await threeRequestsTwice({});
    for (const log of await h.ranks.transferLogs()) {
      const steps = copyJobsPerStep(log, 'gpuToCpu');
      expect(steps.some((s) => s.requests > 1)).toBe(true);
      expect(steps.every((s) => s.copyJobs === 1)).toBe(true);
    }
    expect(h.wrongOutputs()).toEqual([]);
    expect(h.wrongTierBlocks()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it("a step's loads for several requests go out as one transfer job per rank", async () => {
    const h = await threeRequestsTwice({});
    for (const log of await h.ranks.transferLogs()) {
      const steps = copyJobsPerStep(log, 'cpuToGpu');
      expect(steps.some((s) => s.requests > 1)).toBe(true);
      expect(steps.every((s) => s.copyJobs === 1)).toBe(true);
    }
    expect(h.connector.metrics().cpuTierHitTokens).toBeGreaterThan(0);
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });

  it('with coalescing switched off, the same steps send one copy job per request (sensitivity)', async () => {
    const h = await threeRequestsTwice({ separateCopyJobs: true });
    for (const log of await h.ranks.transferLogs()) {
      for (const direction of ['gpuToCpu', 'cpuToGpu'] as const) {
        const steps = copyJobsPerStep(log, direction);
        expect(steps.some((s) => s.copyJobs > 1)).toBe(true);
        expect(steps.every((s) => s.copyJobs === s.requests)).toBe(true);
      }
    }
    expect(h.wrongOutputs()).toEqual([]);
  });
});

describe('copy jobs: completion', () => {
  it("a request's store is reported finished only when the coalesced job holding its blocks completes", async () => {
    const device = new HeldDevice();
    const connector = new WorkerConnector(device);
    connector.queueStores(1, meta([job(1, 'a', 'gpuToCpu', [0, 1]), job(2, 'b', 'gpuToCpu', [2])]));
    connector.markFinished(['a', 'b']);
    connector.startTransfers(2, meta([]));
    expect(device.submitted.map((s) => Array.from(s.gpuBlockIds))).toEqual([[0, 1, 2]]);
    expect(connector.collect().finishedSending).toEqual([]);

    device.complete(1);
    const out = connector.collect();
    expect(out.finishedJobs.map((j) => [j.jobId, j.ok, j.bytes])).toEqual([[1, true, 2048], [2, true, 1024]]);
    // Each job gets its share of the copy job's device time, so the busy time is counted once.
    expect(out.finishedJobs.map((j) => j.elapsedMs)).toEqual([2 / 3, 1 / 3]);
    expect(out.finishedSending).toEqual(['a', 'b']);
    expect(out.copyJobs).toEqual({ gpuToCpu: 1, cpuToGpu: 0 });
  });

  it("a request whose stores ride in two copy jobs is finished sending only after both completed", async () => {
    const device = new HeldDevice();
    const connector = new WorkerConnector(device);
    connector.queueStores(1, meta([job(1, 'a', 'gpuToCpu', [0]), job(2, 'b', 'gpuToCpu', [1])]));
    connector.startTransfers(2, meta([]));
    connector.queueStores(2, meta([job(3, 'a', 'gpuToCpu', [4])]));
    connector.startTransfers(3, meta([]));
    connector.markFinished(['a', 'b']);
    device.complete(1);
    expect(connector.collect().finishedSending).toEqual(['b']);
    device.complete(3);
    expect(connector.collect().finishedSending).toEqual(['a']);
  });

  it("a preempted request's flush waits for the coalesced copy job that carries its stores", async () => {
    const device = new HeldDevice();
    const connector = new WorkerConnector(device);
    connector.queueStores(1, meta([job(1, 'a', 'gpuToCpu', [0]), job(2, 'b', 'gpuToCpu', [1])]));
    connector.startTransfers(2, meta([]));
    let flushed = false;
    const flush = connector.flushPreempted(3, ['b']).then(() => {
      flushed = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed).toBe(false);
    device.complete(1);
    await flush;
    expect(flushed).toBe(true);
  });

  it('a failed coalesced load reports every block it carried as failed, for each of its requests', async () => {
    const device = await openTestDevice();
    try {
      device.setFaults({ jobErrorProbability: 1, seed: 1 });
      const connector = new WorkerConnector(device);
      connector.startTransfers(1, meta([], [job(1, 'a', 'cpuToGpu', [8, 9], [0, 1]), job(2, 'b', 'cpuToGpu', [12], [3])]));
      await connector.waitJobs([1, 2]);
      const out = connector.collect();
      expect(device.faultCounters().jobsFailedOnDevice).toBe(1);
      expect(out.finishedJobs.map((j) => [j.jobId, j.ok, [...j.failedGpuBlockIds]])).toEqual([
        [1, false, [8, 9]],
        [2, false, [12]],
      ]);
      expect([...out.invalidBlockIds].sort((x, y) => x - y)).toEqual([8, 9, 12]);
      expect(out.finishedRecving).toEqual(['a', 'b']);
    } finally {
      device.close();
    }
  });

  it('a failed coalesced load makes each request it carried recompute its blocks, exactly', async () => {
    const h = new OffloadHarness({ tp: 2, switches: { recordTransfers: true } });
    const prompts = [0, 1].map((i) => promptOf(16, 80 + i));
    for (const [i, prompt] of prompts.entries()) await h.serve(`warm-${i}`, { prompt, maxTokens: 1 });
    h.forgetGpuCache();
    // Every block of every load fails, as when the device could not run the copy job carrying them.
    h.ranks.setLoadFaults((spec) => spec.gpuBlockIds);
    prompts.forEach((prompt, i) => h.add(`again-${i}`, { prompt, maxTokens: 4, seed: 3 }));
    await h.runUntilIdle();

    const loads = h.loads().filter((l) => l.reqId?.startsWith('again-'));
    const copyJobs = new Set((await h.ranks.transferLogs())[0].filter((e) => e.direction === 'cpuToGpu').map((e) => e.copyJobId));
    expect(new Set(loads.map((l) => l.reqId)).size).toBe(2);
    expect(copyJobs.size).toBe(1);
    const stats = h.scheduler.stats().loadFailures;
    expect(stats.blocks).toBe(loads.reduce((n, l) => n + l.gpuBlockIds.length, 0));
    expect(stats.requestsRecovered).toBe(2);
    expect(h.wrongOutputs()).toEqual([]);
    expect(await h.leaks()).toEqual([]);
  });
});

describe('copy jobs: device spans', () => {
  it('are kept only once asked for', () => {
    const device = new HeldDevice();
    const connector = new WorkerConnector(device);
    connector.queueStores(1, meta([job(1, 'a', 'gpuToCpu', [0])]));
    connector.startTransfers(2, meta([]));
    device.complete(1);
    connector.collect();
    expect(connector.takeCopyJobSpans()).toEqual([]);
  });

  it('name each finished copy job once with the transfer jobs it carried, also those a reset drops unreported', async () => {
    const device = new HeldDevice();
    const connector = new WorkerConnector(device);
    connector.recordCopyJobSpans();
    connector.queueStores(1, meta([job(1, 'a', 'gpuToCpu', [0, 1]), job(2, 'b', 'gpuToCpu', [2])]));
    connector.startTransfers(2, meta([], [job(3, 'c', 'cpuToGpu', [5], [7])]));
    device.complete(1);
    connector.collect();
    // This device keeps no time axis: its spans say so with a negative start and host side.
    expect(connector.takeCopyJobSpans()).toEqual([
      { copyJobId: 1, transferJobIds: [1, 2], direction: 'gpuToCpu', bytes: 3072, ok: true, startMs: -1, elapsedMs: 1, submitMs: -1, enqueueMs: -1 },
    ]);
    expect(connector.takeCopyJobSpans()).toEqual([]);
    device.complete(3, false);
    await connector.drainAndReset();
    expect(connector.takeCopyJobSpans()).toEqual([
      {
        copyJobId: 3,
        transferJobIds: [3],
        direction: 'cpuToGpu',
        bytes: 0,
        ok: false,
        error: 'injected device error',
        startMs: -1,
        elapsedMs: 1,
        submitMs: -1,
        enqueueMs: -1,
      },
    ]);
  });

  it("carry the device's start and the host's submit and enqueue times of each copy job as the device reported them", () => {
    const device = new HeldDevice();
    const connector = new WorkerConnector(device);
    connector.recordCopyJobSpans();
    connector.queueStores(1, meta([job(1, 'a', 'gpuToCpu', [0])]));
    connector.startTransfers(2, meta([]));
    device.complete(1, true, { startMs: 5.5, submitMs: 4.25, enqueueMs: 0.125 });
    connector.collect();
    expect(connector.takeCopyJobSpans()).toMatchObject([{ copyJobId: 1, startMs: 5.5, elapsedMs: 1, submitMs: 4.25, enqueueMs: 0.125 }]);
  });
});
