import { afterEach, describe, expect, it } from 'vitest';
import type { Device, DeviceJobResult } from '../../src/device/types.js';
import { JobIds, fillGpuBlocks, load, openTestDevice, range, runJob, store, subBlockImages } from './helpers.js';

let device: Device | undefined;
afterEach(() => {
  device?.close();
  device = undefined;
});

/** A block image holding nothing but 0xDEAD words. */
function isPoisoned(image: Buffer): boolean {
  for (let i = 0; i < image.length; i += 2) if (image.readUInt16LE(i) !== 0xdead) return false;
  return true;
}

/** Stores GPU blocks 0..n-1 into CPU blocks 0..n-1 and returns their images. */
async function offloadBlocks(d: Device, jobs: JobIds, n: number): Promise<Map<number, Buffer>> {
  const images = fillGpuBlocks(d, range(0, n));
  await runJob(d, store(jobs.take(), range(0, n), range(0, n)));
  return images;
}

async function loadInto(d: Device, jobs: JobIds, targets: number[], cpuIds: number[]): Promise<DeviceJobResult> {
  return runJob(d, load(jobs.take(), targets, cpuIds));
}

describe('injected load failures', () => {
  it('poison and report exactly the listed GPU blocks; the others load intact', async () => {
    device = await openTestDevice({ numGpuBlocks: 16, numCpuBlocks: 8, layout: 'per-layer' });
    const d = device;
    const jobs = new JobIds();
    const images = await offloadBlocks(d, jobs, 4);
    d.setFaults({ loadFailBlocks: [9, 11] });

    const result = await loadInto(d, jobs, [8, 9, 10, 11], [0, 1, 2, 3]);
    expect(result.ok).toBe(false);
    expect(result.failedGpuBlockIds).toEqual([9, 11]);
    expect(result.bytes).toBe(2 * d.info.bytesPerGpuBlock);
    expect(isPoisoned(d.readGpuBlock(9))).toBe(true);
    expect(isPoisoned(d.readGpuBlock(11))).toBe(true);
    expect(d.readGpuBlock(8).equals(images.get(0)!)).toBe(true);
    expect(d.readGpuBlock(10).equals(images.get(2)!)).toBe(true);
    expect(d.faultCounters().loadBlocksFailed).toBe(2);
  });

  it('fail with the seeded probability, the same blocks for the same seed and job sequence', async () => {
    const failuresFor = async (seed: number): Promise<number[][]> => {
      const d = await openTestDevice({ numGpuBlocks: 16, numCpuBlocks: 8 });
      try {
        const jobs = new JobIds();
        await offloadBlocks(d, jobs, 8);
        d.setFaults({ loadFailProbability: 0.5, seed });
        const failed: number[][] = [];
        for (let round = 0; round < 4; round++) {
          const result = await loadInto(d, jobs, range(8, 16), range(0, 8));
          failed.push([...result.failedGpuBlockIds]);
          for (const id of result.failedGpuBlockIds) expect(isPoisoned(d.readGpuBlock(id))).toBe(true);
        }
        return failed;
      } finally {
        d.close();
      }
    };
    const first = await failuresFor(7);
    expect(await failuresFor(7)).toEqual(first);
    expect(await failuresFor(8)).not.toEqual(first);
    const total = first.flat().length;
    // 32 draws at p = 0.5: far from none and far from all.
    expect(total).toBeGreaterThan(4);
    expect(total).toBeLessThan(28);
  });

  it('stop after loadFailLimit failures', async () => {
    device = await openTestDevice({ numGpuBlocks: 16, numCpuBlocks: 8 });
    const d = device;
    const jobs = new JobIds();
    const images = await offloadBlocks(d, jobs, 8);
    d.setFaults({ loadFailProbability: 1, loadFailLimit: 3 });

    const first = await loadInto(d, jobs, range(8, 13), range(0, 5));
    expect(first.failedGpuBlockIds).toEqual([8, 9, 10]);
    const second = await loadInto(d, jobs, range(8, 13), range(0, 5));
    expect(second).toMatchObject({ ok: true, failedGpuBlockIds: [] });
    range(8, 13).forEach((g, i) => expect(d.readGpuBlock(g).equals(images.get(i)!)).toBe(true));
    expect(d.faultCounters().loadBlocksFailed).toBe(3);
  });
});

describe('injected store failures', () => {
  it('report the store as not ok and leave poison, not data, in its CPU blocks', async () => {
    device = await openTestDevice({ offloadFactor: 2 });
    const d = device;
    const jobs = new JobIds();
    fillGpuBlocks(d, [0, 1, 2, 3]);
    d.setFaults({ storeFailProbability: 1 });
    const failed = await runJob(d, store(jobs.take(), [0, 1], [5]));
    expect(failed).toMatchObject({ ok: false, failedGpuBlockIds: [], bytes: 0 });
    expect(subBlockImages(d, 5).every(isPoisoned)).toBe(true);

    d.setFaults({});
    const stored = await runJob(d, store(jobs.take(), [2, 3], [6]));
    expect(stored.ok).toBe(true);
    expect(d.faultCounters().storesFailed).toBe(1);
  });
});

describe('injected delays', () => {
  it('hold a job back on its stream, so its reads happen late, and are counted', async () => {
    device = await openTestDevice();
    const d = device;
    const jobs = new JobIds();
    fillGpuBlocks(d, [0]);
    d.setFaults({ delayMs: 100 });
    const job = store(jobs.take(), [0], [0]);
    d.submitTransfer(job);
    // Written after the submit but before the delayed copy reads the block.
    const later = fillGpuBlocks(d, [0], 500).get(0)!;
    await d.waitJobs([job.jobId]);
    expect(subBlockImages(d, 0)[0].equals(later)).toBe(true);
    expect(d.faultCounters()).toEqual({ loadBlocksFailed: 0, storesFailed: 0, jobsDelayed: 1, jobsFailedOnDevice: 0 });
  });
});
