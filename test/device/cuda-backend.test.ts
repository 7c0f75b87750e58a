import { afterEach, describe, expect, it } from 'vitest';
import { cudaDeviceCount } from '../../src/device/native.js';
import type { Device, KvLayout } from '../../src/device/types.js';
import { rankDigest } from '../../src/model/reference.js';
import {
  TINY,
  JobIds,
  closeAll,
  fillGpuBlocks,
  load,
  openRanks,
  openTestDevice,
  packBatch,
  range,
  runJob,
  store,
  subBlockImages,
} from './helpers.js';

/**
 * The CUDA backend against the same expectations as the host backend. Runs
 * only where the cuda addon is built and sees a GPU; elsewhere it is skipped.
 */
const hasGpu = cudaDeviceCount() > 0;
const LAYOUTS: KvLayout[] = ['cross-layer', 'per-layer'];

let open: Device[] = [];
afterEach(() => {
  closeAll(open);
  open = [];
});

async function cudaDevice(overrides: Parameters<typeof openTestDevice>[0] = {}): Promise<Device> {
  const d = await openTestDevice({ backend: 'cuda', numGpuBlocks: 40, numCpuBlocks: 10, ...overrides });
  open.push(d);
  return d;
}

describe.skipIf(!hasGpu)('the cuda backend', () => {
  it.each(LAYOUTS)('round-trips blocks exactly (%s, f = 3, mid-block load)', async (layout) => {
    const d = await cudaDevice({ layout, offloadFactor: 3 });
    const jobs = new JobIds();
    const gpuIds = [...range(0, 3), 17, 9, 30];
    const images = fillGpuBlocks(d, gpuIds);
    expect((await runJob(d, store(jobs.take(), gpuIds, [4, 1]))).ok).toBe(true);
    const subBlocks = [4, 1].flatMap((c) => subBlockImages(d, c));
    gpuIds.forEach((g, i) => expect(subBlocks[i].equals(images.get(g)!)).toBe(true));
    const targets = [33, 34, 35, 36, 37];
    await runJob(d, load(jobs.take(), targets, [4, 1], { firstSubBlock: 1 }));
    targets.forEach((g, i) => expect(d.readGpuBlock(g).equals(images.get(gpuIds[i + 1])!)).toBe(true));
  });

  it.each(LAYOUTS)('computes digests equal to the reference with tp = 2 (%s)', async (layout) => {
    const devices = await openRanks(2, { backend: 'cuda', layout, numGpuBlocks: 40 });
    open.push(...devices);
    const first = [5, 9, 100, 31000, 7, 7, 1, 2, 3, 4];
    const second = [...first.slice(0, 8), 11, 12, 13];
    const batch = packBatch([
      { blockTable: [3, 8, 20], startPosition: 0, tokens: first, sample: true },
      { blockTable: [3, 8, 21], startPosition: 8, tokens: second.slice(8), sample: true },
    ]);
    const digests = await Promise.all(devices.map((d) => d.forward(batch)));
    digests.forEach((g, rank) => {
      expect(g[0]).toBe(rankDigest(TINY, 2, rank, first, first.length));
      expect(g[1]).toBe(rankDigest(TINY, 2, rank, second, second.length));
    });
  });

  it('orders a store after the compute before it, and only then', async () => {
    const d = await cudaDevice({ model: { ...TINY, computeNsPerToken: 100_000_000 } });
    const jobs = new JobIds();
    const before = d.readGpuBlock(2);
    const forward = d.forward(packBatch([{ blockTable: [2], startPosition: 0, tokens: [1, 2, 3], sample: false }]));
    d.submitTransfer(store(jobs.take(), [2], [0], { orderAfterCompute: false }));
    const ordered = store(jobs.take(), [2], [1]);
    d.submitTransfer(ordered);
    await forward;
    await d.synchronize();
    expect(subBlockImages(d, 0)[0].equals(before)).toBe(true);
    expect(subBlockImages(d, 1)[0].equals(d.readGpuBlock(2))).toBe(true);
  });

  it('poisons and reports failed loads', async () => {
    const d = await cudaDevice();
    const jobs = new JobIds();
    fillGpuBlocks(d, [0, 1]);
    await runJob(d, store(jobs.take(), [0, 1], [0, 1]));
    d.setFaults({ loadFailBlocks: [6] });
    const result = await runJob(d, load(jobs.take(), [5, 6], [0, 1]));
    expect(result.failedGpuBlockIds).toEqual([6]);
    const poisoned = d.readGpuBlock(6);
    expect(poisoned.readUInt16LE(0)).toBe(0xdead);
    expect(poisoned.readUInt16LE(poisoned.length - 2)).toBe(0xdead);
  });

  it('times a contiguous copy in each direction', async () => {
    const d = await cudaDevice();
    const bytes = 4 * d.info.bytesPerGpuBlock;
    for (const direction of ['gpuToCpu', 'cpuToGpu'] as const) {
      expect(await d.timeContiguousCopy!(direction, bytes)).toBeGreaterThan(0);
    }
  });
});
