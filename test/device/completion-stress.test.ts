import { describe, expect, it } from 'vitest';
import { runOverlapBench, type OverlapBenchOptions } from '../../src/bench/overlap.js';
import { runTransferBench, type TransferBenchOptions } from '../../src/bench/transfer.js';
import type { Device, DeviceJobResult, TransferSubmission } from '../../src/device/types.js';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { openTestDevice } from './helpers.js';

/**
 * Every submitted job ends with exactly one completion, ok or failed with the
 * device's error, whatever the delays between submission and completion:
 * the transfer and overlap benches, and jobs ordered after one another, run
 * 20 times in a row with random per-job delays (and device failures) drawn
 * from a seed. A lost completion would leave a wait pending and the test
 * would not finish; nothing here depends on how fast the machine is.
 */

const RUNS = 20;
/** Random extra delay per job, uniform in [0, JITTER_MS). */
const JITTER_MS = 2;

function transferRun(seed: number, overrides: Partial<TransferBenchOptions> = {}): TransferBenchOptions {
  return {
    backend: 'host',
    models: [MODEL_PRESETS.tiny],
    layouts: ['per-layer'],
    blockTokens: [16],
    numBlocks: 12,
    repeats: 1,
    seed,
    faults: { delayJitterMs: JITTER_MS, seed },
    ...overrides,
  };
}

function overlapRun(seed: number, overrides: Partial<OverlapBenchOptions> = {}): OverlapBenchOptions {
  return {
    backend: 'host',
    models: [MODEL_PRESETS.tiny],
    layouts: ['cross-layer'],
    blockTokens: [16],
    transfers: ['both'],
    batch: 2,
    contextTokens: 16,
    stepsPerRound: 1,
    rounds: 1,
    jobBytes: 16 * 1024,
    faults: { delayJitterMs: JITTER_MS, seed },
    ...overrides,
  };
}

/** Submits `count` jobs alternating direction, each load ordered after the store before it. */
function submitChain(device: Device, count: number): number[] {
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    const direction = i % 2 === 0 ? 'gpuToCpu' : 'cpuToGpu';
    const job: TransferSubmission = {
      jobId: i + 1,
      direction,
      gpuBlockIds: [i % 8],
      cpuBlockIds: [i % 8],
      orderAfterCompute: false,
      after: direction === 'cpuToGpu' ? [i] : undefined,
    };
    device.submitTransfer(job);
    ids.push(job.jobId);
  }
  return ids;
}

/** Waits for `ids` and returns every result polled, by job id (a duplicate fails). */
async function collectOnce(device: Device, ids: readonly number[]): Promise<Map<number, DeviceJobResult>> {
  await device.waitJobs(ids);
  const results = new Map<number, DeviceJobResult>();
  for (const result of device.pollFinished()) {
    expect(results.has(result.jobId)).toBe(false);
    results.set(result.jobId, result);
  }
  return results;
}

describe('job completions under random delays', () => {
  it('the transfer bench finishes 20 runs in a row with every job timed', async () => {
    for (let seed = 1; seed <= RUNS; seed++) {
      const rows = await runTransferBench(transferRun(seed));
      expect(rows.map((r) => r.direction)).toEqual(['gpuToCpu', 'cpuToGpu', 'both']);
      for (const row of rows) expect(row.gbps).toBeGreaterThan(0);
    }
  });

  it('the overlap bench finishes 20 runs in a row with every job collected', async () => {
    for (let seed = 1; seed <= RUNS; seed++) {
      const rows = await runOverlapBench(overlapRun(seed));
      expect(rows).toHaveLength(1);
      expect(rows[0].storeGbps).toBeGreaterThan(0);
      expect(rows[0].loadGbps).toBeGreaterThan(0);
    }
  });

  it('chains of ordered jobs report each job exactly once, failed ones with the device error', async () => {
    for (let seed = 1; seed <= RUNS; seed++) {
      const device = await openTestDevice();
      try {
        device.setFaults({ delayJitterMs: JITTER_MS, jobErrorProbability: 0.3, seed });
        const ids = submitChain(device, 16);
        const results = await collectOnce(device, ids);
        expect([...results.keys()].sort((a, b) => a - b)).toEqual(ids);
        expect(device.pendingJobs()).toBe(0);
        const failed = [...results.values()].filter((r) => r.error !== undefined);
        expect(failed.length).toBe(device.faultCounters().jobsFailedOnDevice);
        for (const result of results.values()) {
          expect(result.copyPath).toBe('memcpy');
          if (result.error === undefined) {
            expect(result.ok).toBe(true);
            continue;
          }
          expect([result.ok, result.bytes, result.error]).toEqual([false, 0, `injected device error (job ${result.jobId})`]);
          // A load the device could not run leaves every block it was writing invalid.
          if (result.direction === 'cpuToGpu') expect(result.failedGpuBlockIds).toEqual([(result.jobId - 1) % 8]);
        }
      } finally {
        device.close();
      }
    }
  });

  it('draws the same delays and failures from the same seed', async () => {
    const outcome = async () => {
      const device = await openTestDevice();
      try {
        device.setFaults({ delayJitterMs: JITTER_MS, jobErrorProbability: 0.5, seed: 7 });
        const results = await collectOnce(device, submitChain(device, 12));
        return [...results.values()].filter((r) => !r.ok).map((r) => r.jobId).sort((a, b) => a - b);
      } finally {
        device.close();
      }
    };
    const first = await outcome();
    expect(first.length).toBeGreaterThan(0);
    expect(await outcome()).toEqual(first);
  });
});

describe('a job that fails on the device', () => {
  it('stops the transfer bench with the job, its shape, the copy method and the device error', async () => {
    await expect(runTransferBench(transferRun(3, { copyMethods: ['dma'], faults: { jobErrorProbability: 1 } }))).rejects.toThrow(
      /^transfer bench: job 1 \(gpuToCpu, 12 blocks, \d+ bytes, \d+ runs of adjacent blocks, one region per layer each; copy method dma \(memcpy\)\) failed on the device: injected device error \(job 1\)$/,
    );
  });

  it('stops the overlap bench with the job and the device error, after collecting every job', async () => {
    await expect(runOverlapBench(overlapRun(3, { faults: { jobErrorProbability: 1 } }))).rejects.toThrow(
      /^overlap bench: transfer job \d+ \((gpuToCpu|cpuToGpu), \d+ blocks, \d+ bytes, memcpy\) failed on the device: injected device error \(job \d+\)$/,
    );
  });

  it('refuses fault settings out of range, naming the field', async () => {
    const device = await openTestDevice();
    try {
      expect(() => device.setFaults({ jobErrorProbability: 2 })).toThrow('jobErrorProbability');
      expect(() => device.setFaults({ delayJitterMs: -1 })).toThrow('delayJitterMs');
    } finally {
      device.close();
    }
  });
});
