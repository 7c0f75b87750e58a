import { afterEach, describe, expect, it } from 'vitest';
import type { Device, KvLayout } from '../../src/device/types.js';
import {
  JobIds,
  fillGpuBlocks,
  load,
  openTestDevice,
  range,
  runJob,
  seededRandom,
  shuffled,
  store,
  subBlockImages,
  type TestDeviceOptions,
} from './helpers.js';

const LAYOUTS: KvLayout[] = ['cross-layer', 'per-layer'];
const FACTORS = [1, 3];

let device: Device | undefined;
afterEach(() => {
  device?.close();
  device = undefined;
});

async function open(options: TestDeviceOptions): Promise<Device> {
  device = await openTestDevice({ numGpuBlocks: 40, numCpuBlocks: 10, ...options });
  return device;
}

function zeroGpuBlocks(d: Device, ids: readonly number[]): void {
  for (const id of ids) d.writeGpuBlock(id, Buffer.alloc(d.info.bytesPerGpuBlock));
}

describe.each(LAYOUTS.flatMap((layout) => FACTORS.map((f) => [layout, f] as const)))(
  'transfers in the %s layout with offloadFactor %d',
  (layout, f) => {
    it('a store puts each GPU block in its CPU sub-block and a load brings every byte back', async () => {
      const d = await open({ layout, offloadFactor: f });
      const jobs = new JobIds();
      const cpuIds = [7, 2];
      const gpuIds = range(3, 3 + 2 * f);
      const images = fillGpuBlocks(d, gpuIds);

      const stored = await runJob(d, store(jobs.take(), gpuIds, cpuIds));
      expect(stored).toMatchObject({ ok: true, failedGpuBlockIds: [], bytes: gpuIds.length * d.info.bytesPerGpuBlock });
      const subBlocks = cpuIds.flatMap((c) => subBlockImages(d, c));
      gpuIds.forEach((g, i) => expect(subBlocks[i].equals(images.get(g)!)).toBe(true));

      const targets = range(20, 20 + 2 * f);
      zeroGpuBlocks(d, targets);
      const loaded = await runJob(d, load(jobs.take(), targets, cpuIds));
      expect(loaded.ok).toBe(true);
      targets.forEach((g, i) => expect(d.readGpuBlock(g).equals(images.get(gpuIds[i])!)).toBe(true));
    });

    it('a load that starts mid CPU block skips its first sub-blocks', async () => {
      const d = await open({ layout, offloadFactor: f });
      const jobs = new JobIds();
      const gpuIds = range(0, 2 * f);
      const images = fillGpuBlocks(d, gpuIds);
      await runJob(d, store(jobs.take(), gpuIds, [4, 5]));

      const firstSubBlock = f - 1;
      const targets = range(30, 30 + 2 * f - firstSubBlock);
      await runJob(d, load(jobs.take(), targets, [4, 5], { firstSubBlock }));
      targets.forEach((g, i) => expect(d.readGpuBlock(g).equals(images.get(gpuIds[i + firstSubBlock])!)).toBe(true));
    });

    it('scattered and adjacent id lists, across CPU chunk boundaries, land where they belong', async () => {
      const d = await open({ layout, offloadFactor: f });
      // Chunks of two CPU blocks: adjacent runs must split where a chunk ends.
      const chunked = await openTestDevice({
        numGpuBlocks: 40,
        numCpuBlocks: 10,
        layout,
        offloadFactor: f,
        cpuChunkBytes: 2 * d.info.bytesPerCpuBlock,
      });
      try {
        for (const dev of [d, chunked]) {
          const random = seededRandom(17 + f);
          const jobs = new JobIds();
          const cpuIds = [3, 4, 5, 0, 9, 8];
          const count = cpuIds.length * f;
          // Half adjacent (a run), half shuffled.
          const gpuIds = [...range(1, 1 + count / 2), ...shuffled(random, range(20, 40)).slice(0, count / 2)];
          const images = fillGpuBlocks(dev, gpuIds, 100);
          await runJob(dev, store(jobs.take(), gpuIds, cpuIds));

          const subBlocks = cpuIds.flatMap((c) => subBlockImages(dev, c));
          gpuIds.forEach((g, i) => expect(subBlocks[i].equals(images.get(g)!)).toBe(true));

          const targets = shuffled(random, range(0, 40)).slice(0, count);
          zeroGpuBlocks(dev, targets);
          await runJob(dev, load(jobs.take(), targets, cpuIds));
          targets.forEach((g, i) => expect(dev.readGpuBlock(g).equals(images.get(gpuIds[i])!)).toBe(true));
        }
      } finally {
        chunked.close();
      }
    });
  },
);

describe('the CPU tier', () => {
  it('is allocated in chunks of whole CPU blocks, reporting progress up to the total', async () => {
    const progress: Array<[number, number]> = [];
    const probe = await open({ numCpuBlocks: 1 });
    const bytesPerCpuBlock = probe.info.bytesPerCpuBlock;
    probe.close();

    const d = await open({
      numCpuBlocks: 7,
      cpuChunkBytes: 3 * bytesPerCpuBlock,
      onAllocProgress: (allocated, total) => progress.push([allocated, total]),
    });
    expect(d.info.cpuChunks).toBe(3);
    expect(d.info.cpuBytes).toBe(7 * bytesPerCpuBlock);
    expect(progress).toEqual([
      [3 * bytesPerCpuBlock, 7 * bytesPerCpuBlock],
      [6 * bytesPerCpuBlock, 7 * bytesPerCpuBlock],
      [7 * bytesPerCpuBlock, 7 * bytesPerCpuBlock],
    ]);
  });

  it('reports block sizes from the model shape, the rank share of heads and the offload factor', async () => {
    const d = await open({ tp: 2, rank: 1, offloadFactor: 3 });
    // tiny: 2 layers, K and V, 4 heads / 2 ranks, 4 slots, 8 dims, 2 bytes.
    expect(d.info.bytesPerGpuBlock).toBe(2 * 2 * 2 * 4 * 8 * 2);
    expect(d.info.bytesPerCpuBlock).toBe(3 * d.info.bytesPerGpuBlock);
    expect(d.info.gpuBytes).toBe(40 * d.info.bytesPerGpuBlock);
    expect(d.info.backend).toBe('host');
  });

  it('with no CPU blocks still serves forwards and block reads', async () => {
    const d = await open({ numCpuBlocks: 0 });
    expect(d.info.cpuBytes).toBe(0);
    expect(d.readGpuBlock(0).length).toBe(d.info.bytesPerGpuBlock);
  });
});
