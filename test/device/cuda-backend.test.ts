import { afterEach, describe, expect, it } from 'vitest';
import { cudaDeviceCount } from '../../src/device/native.js';
import { COPY_METHODS, type Device, type KvLayout } from '../../src/device/types.js';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { rankDigest } from '../../src/model/reference.js';
import { bytesPerGpuBlock } from '../../src/model/shape.js';
import {
  TINY_NO_COMPUTE,
  JobIds,
  closeAll,
  fillGpuBlocks,
  load,
  loadAfterDelayedStore,
  openRanks,
  openTestDevice,
  packBatch,
  range,
  runJob,
  store,
  subBlockImages,
} from './helpers.js';

/**
 * The CUDA backend against the same expectations as the host backend, with
 * every copy method (DMA, the copy kernel, and auto) over both layouts. Runs
 * only where the cuda addon is built and sees a GPU; elsewhere it is skipped
 * (the kernels themselves are also checked on the CPU, in
 * cuda-kernels-on-cpu.test.ts).
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

/** 100 ms of emulated compute per token: a forward of 3 tokens keeps the compute stream busy for 300 ms. */
const SLOW = { ...TINY_NO_COMPUTE, computeNsPerToken: 100_000_000 };
/** Blocks of 128 KiB (cross-layer) or 32 KiB per layer: runs of them span several copy kernel tiles. */
const SMALL = { ...MODEL_PRESETS.small, computeNsPerToken: 0 };

const isPoisoned = (image: Buffer) => image.readUInt16LE(0) === 0xdead && image.readUInt16LE(image.length - 2) === 0xdead;

describe.skipIf(!hasGpu)('the cuda backend', () => {
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
      expect(g[0]).toBe(rankDigest(TINY_NO_COMPUTE, 2, rank, first, first.length));
      expect(g[1]).toBe(rankDigest(TINY_NO_COMPUTE, 2, rank, second, second.length));
    });
  });

  it('computes the same digests with emulated compute on every SM before the writes', async () => {
    const d = await cudaDevice({ model: { ...TINY_NO_COMPUTE, computeNsPerToken: 2_000_000 } });
    const tokens = [4, 8, 15, 16, 23, 42];
    const digests = await d.forward(packBatch([{ blockTable: [0, 1], startPosition: 0, tokens, sample: true }]));
    expect(digests[0]).toBe(rankDigest(TINY_NO_COMPUTE, 1, 0, tokens, tokens.length));
  });

  it('places forwards and copy jobs of different streams on one time axis from the open', async () => {
    const d = await cudaDevice({ model: SLOW });
    const jobs = new JobIds();
    await d.forward(packBatch([{ blockTable: [2], startPosition: 0, tokens: [1], sample: false }]));
    const forward = d.lastForwardDeviceSpan!()!;
    // A store ordered after the compute starts on the store stream once the forward has ended.
    const stored = await runJob(d, store(jobs.take(), [2], [0]));
    expect(forward.startMs).toBeGreaterThanOrEqual(0);
    // The tolerance is the events' resolution (about half a microsecond).
    expect(stored.startMs!).toBeGreaterThanOrEqual(forward.startMs + forward.elapsedMs - 0.01);
  });

  it("gives forwards and copy jobs the host's submit time on the same axis, in submission order, and their host enqueue time", async () => {
    const d = await cudaDevice({ model: SLOW });
    const jobs = new JobIds();
    await d.forward(packBatch([{ blockTable: [2], startPosition: 0, tokens: [1], sample: false }]));
    const forward = d.lastForwardDeviceSpan!()!;
    const stored = await runJob(d, store(jobs.take(), [2], [0]));
    expect(forward.submitMs).toBeGreaterThanOrEqual(0);
    expect(forward.enqueueMs).toBeGreaterThanOrEqual(0);
    expect(stored.submitMs!).toBeGreaterThanOrEqual(forward.submitMs);
    expect(stored.enqueueMs!).toBeGreaterThanOrEqual(0);
  });

  it('times a contiguous copy in each direction', async () => {
    const d = await cudaDevice();
    const bytes = 4 * d.info.bytesPerGpuBlock;
    for (const direction of ['gpuToCpu', 'cpuToGpu'] as const) {
      expect(await d.timeContiguousCopy!(direction, bytes)).toBeGreaterThan(0);
    }
  });
});

const CASES = COPY_METHODS.flatMap((copyMethod) => LAYOUTS.map((layout) => ({ copyMethod, layout })));

describe.skipIf(!hasGpu).each(CASES)('cuda transfers, copyMethod $copyMethod, $layout', ({ copyMethod, layout }) => {
  it('round-trips blocks exactly (f = 3, load from mid-block)', async () => {
    const d = await cudaDevice({ layout, copyMethod, offloadFactor: 3 });
    const jobs = new JobIds();
    const gpuIds = [...range(0, 3), 17, 9, 30];
    const images = fillGpuBlocks(d, gpuIds);
    expect((await runJob(d, store(jobs.take(), gpuIds, [4, 1]))).ok).toBe(true);
    const subBlocks = [4, 1].flatMap((c) => subBlockImages(d, c));
    gpuIds.forEach((g, i) => expect(subBlocks[i].equals(images.get(g)!)).toBe(true));
    const targets = [33, 34, 35, 36, 37];
    expect((await runJob(d, load(jobs.take(), targets, [4, 1], { firstSubBlock: 1 }))).ok).toBe(true);
    targets.forEach((g, i) => expect(d.readGpuBlock(g).equals(images.get(gpuIds[i + 1])!)).toBe(true));
  });

  it('round-trips runs of large blocks, across CPU chunks', async () => {
    // Five CPU blocks per chunk: the runs split at chunk ends.
    const cpuChunkBytes = 5 * bytesPerGpuBlock(SMALL, 1, 64);
    const d = await cudaDevice({ layout, copyMethod, model: SMALL, blockSize: 64, numGpuBlocks: 24, numCpuBlocks: 12, cpuChunkBytes });
    const jobs = new JobIds();
    const gpuIds = [...range(0, 7), 12, 13, 20];
    const cpuIds = [...range(2, 12)];
    const images = fillGpuBlocks(d, gpuIds);
    expect((await runJob(d, store(jobs.take(), gpuIds, cpuIds))).ok).toBe(true);
    cpuIds.forEach((c, i) => expect(d.readCpuBlock(c).equals(images.get(gpuIds[i])!)).toBe(true));
    const targets = [...range(7, 12), 14, 15, 16, 21, 22];
    expect((await runJob(d, load(jobs.take(), targets, cpuIds))).ok).toBe(true);
    targets.forEach((g, i) => expect(d.readGpuBlock(g).equals(images.get(gpuIds[i])!)).toBe(true));
  });

  it('poisons and reports failed loads; the other blocks load intact', async () => {
    const d = await cudaDevice({ layout, copyMethod });
    const jobs = new JobIds();
    const images = fillGpuBlocks(d, [0, 1, 2]);
    await runJob(d, store(jobs.take(), [0, 1, 2], [0, 1, 2]));
    d.setFaults({ loadFailBlocks: [6] });
    const result = await runJob(d, load(jobs.take(), [5, 6, 7], [0, 1, 2]));
    expect(result.failedGpuBlockIds).toEqual([6]);
    expect(isPoisoned(d.readGpuBlock(6))).toBe(true);
    expect(d.readGpuBlock(5).equals(images.get(0)!)).toBe(true);
    expect(d.readGpuBlock(7).equals(images.get(2)!)).toBe(true);
  });

  it('leaves poison, not data, in the CPU blocks of a failed store', async () => {
    const d = await cudaDevice({ layout, copyMethod, offloadFactor: 2 });
    const jobs = new JobIds();
    fillGpuBlocks(d, [0, 1]);
    d.setFaults({ storeFailProbability: 1 });
    const failed = await runJob(d, store(jobs.take(), [0, 1], [5]));
    expect(failed.ok).toBe(false);
    expect(subBlockImages(d, 5).every(isPoisoned)).toBe(true);
  });

  it('orders a store after the compute before it, and only then', async () => {
    const d = await cudaDevice({ layout, copyMethod, model: SLOW });
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

  it('runs a load named after a delayed store of the same CPU blocks only once the store has written them', async () => {
    const d = await cudaDevice({ layout, copyMethod });
    expect(await loadAfterDelayedStore(d)).toEqual([true, true]);
  });

  it('a forward named after a load reads what the load wrote', async () => {
    const d = await cudaDevice({ layout, copyMethod });
    const jobs = new JobIds();
    const tokens = [1, 2, 3, 4];
    await d.forward(packBatch([{ blockTable: [1], startPosition: 0, tokens, sample: false }]));
    await runJob(d, store(jobs.take(), [1], [3]));
    d.writeGpuBlock(1, Buffer.alloc(d.info.bytesPerGpuBlock));
    d.setFaults({ delayMs: 150 });
    const reload = load(jobs.take(), [1], [3]);
    d.submitTransfer(reload);
    const digest = await d.forward(packBatch([{ blockTable: [1, 2], startPosition: 4, tokens: [5], sample: true }]), {
      after: [reload.jobId],
    });
    expect(digest[0]).toBe(rankDigest(TINY_NO_COMPUTE, 1, 0, [...tokens, 5], 5));
  });
});
