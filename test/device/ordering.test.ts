import { afterEach, describe, expect, it } from 'vitest';
import type { Device } from '../../src/device/types.js';
import {
  TINY_NO_COMPUTE,
  JobIds,
  fillGpuBlocks,
  load,
  loadAfterDelayedStore,
  openTestDevice,
  packBatch,
  runJob,
  store,
  subBlockImages,
} from './helpers.js';

let device: Device | undefined;
afterEach(() => {
  device?.close();
  device = undefined;
});

/** 100 ms of emulated compute per token: a forward of 3 tokens keeps the compute stream busy for 300 ms. */
const SLOW = { ...TINY_NO_COMPUTE, computeNsPerToken: 100_000_000 };

async function openSlow(): Promise<Device> {
  device = await openTestDevice({ model: SLOW });
  return device;
}

/** A forward that writes positions 0..2 of a request whose first block is `block`. */
function writeBlock(d: Device, block: number): Promise<Uint32Array> {
  return d.forward(packBatch([{ blockTable: [block], startPosition: 0, tokens: [11, 12, 13], sample: false }]));
}

describe('stores and compute', () => {
  it('a store submitted without waiting for compute copies stale data; an ordered store never does', async () => {
    const d = await openSlow();
    const jobs = new JobIds();
    const before = d.readGpuBlock(2);

    // Unordered: the copy runs while the forward is still computing.
    const unorderedForward = writeBlock(d, 2);
    d.submitTransfer(store(jobs.take(), [2], [0], { orderAfterCompute: false }));
    await unorderedForward;
    await d.synchronize();
    const after = d.readGpuBlock(2);
    expect(after.equals(before)).toBe(false);
    expect(subBlockImages(d, 0)[0].equals(before)).toBe(true);

    // Ordered (the default): the copy starts only once that forward has finished.
    for (const [block, cpu] of [[5, 1], [6, 2]] as const) {
      const forward = writeBlock(d, block);
      const job = store(jobs.take(), [block], [cpu]);
      d.submitTransfer(job);
      await forward;
      await d.waitJobs([job.jobId]);
      expect(subBlockImages(d, cpu)[0].equals(d.readGpuBlock(block))).toBe(true);
    }
  });

  it('a forward waits for the loads it names before reading the cache', async () => {
    device = await openTestDevice({ model: { ...TINY_NO_COMPUTE, computeNsPerToken: 0 } });
    const d = device;
    const jobs = new JobIds();
    await d.forward(packBatch([{ blockTable: [1], startPosition: 0, tokens: [1, 2, 3, 4], sample: false }]));
    await runJob(d, store(jobs.take(), [1], [3]));
    d.writeGpuBlock(1, Buffer.alloc(d.info.bytesPerGpuBlock));
    // The load is delayed on its stream; the forward must still see its data.
    d.setFaults({ delayMs: 150 });
    const reload = load(jobs.take(), [1], [3]);
    d.submitTransfer(reload);
    const digest = await d.forward(
      packBatch([{ blockTable: [1, 2], startPosition: 4, tokens: [5], sample: true }]),
      { after: [reload.jobId] },
    );
    const reference = await openTestDevice();
    try {
      const expected = await reference.forward(
        packBatch([{ blockTable: [0, 1], startPosition: 0, tokens: [1, 2, 3, 4, 5], sample: true }]),
      );
      expect(digest[0]).toBe(expected[0]);
    } finally {
      reference.close();
    }
  });
});

describe('jobs ordered with after', () => {
  it('a load named after a store of the same blocks reads what the store wrote', async () => {
    device = await openTestDevice();
    // The store is delayed on its stream; without `after` the load would read zeros.
    expect(await loadAfterDelayedStore(device)).toEqual([true, true]);
  });

  it('without after the same load races ahead of the delayed store', async () => {
    device = await openTestDevice();
    const d = device;
    const jobs = new JobIds();
    fillGpuBlocks(d, [4]);
    d.setFaults({ delayMs: 150 });
    const write = store(jobs.take(), [4], [6]);
    d.submitTransfer(write);
    d.setFaults({});
    const read = load(jobs.take(), [10], [6]);
    d.submitTransfer(read);
    await d.waitJobs([read.jobId]);
    expect(d.readGpuBlock(10).equals(Buffer.alloc(d.info.bytesPerGpuBlock))).toBe(true);
    await d.waitJobs([write.jobId]);
  });
});

describe('job bookkeeping', () => {
  it('reports each finished job once, in completion order, and counts pending ones', async () => {
    device = await openTestDevice();
    const d = device;
    fillGpuBlocks(d, [0, 1, 2]);
    d.setFaults({ delayMs: 50 });
    d.submitTransfer(store(1, [0], [0]));
    d.submitTransfer(store(2, [1], [1]));
    expect(d.pendingJobs()).toBe(2);
    await d.waitJobs([1, 2]);
    expect(d.pendingJobs()).toBe(0);
    const results = d.pollFinished();
    expect(results.map((r) => r.jobId)).toEqual([1, 2]);
    expect(results.every((r) => r.direction === 'gpuToCpu' && r.elapsedMs >= 0)).toBe(true);
    expect(d.pollFinished()).toEqual([]);
  });

  it('waitJobs counts already finished jobs and rejects ids never submitted', async () => {
    device = await openTestDevice();
    const d = device;
    await runJob(d, store(1, [0], [0]));
    await expect(d.waitJobs([1])).resolves.toBeUndefined();
    await expect(d.waitJobs([1, 99])).rejects.toMatchObject({
      code: 'ERR_KVTIER_DEVICE',
      message: expect.stringContaining('jobIds[1] = 99'),
    });
  });

  it('several waits on overlapping jobs each resolve once their own jobs have finished', async () => {
    device = await openTestDevice();
    const d = device;
    d.setFaults({ delayMs: 30 });
    d.submitTransfer(store(1, [0], [0]));
    d.submitTransfer(store(2, [1], [1]));
    d.submitTransfer(load(3, [5], [2]));
    const order: string[] = [];
    const waits = [
      d.waitJobs([1]).then(() => order.push('1')),
      d.waitJobs([1, 2, 1]).then(() => order.push('1+2')),
      d.waitJobs([3]).then(() => order.push('3')),
      d.waitJobs([2, 3]).then(() => order.push('2+3')),
    ];
    await Promise.all(waits);
    expect(order.indexOf('1')).toBeLessThan(order.indexOf('1+2'));
    expect(order).toHaveLength(4);
    expect(d.pendingJobs()).toBe(0);
  });

  it('a finished job id may be submitted again', async () => {
    device = await openTestDevice();
    const d = device;
    await runJob(d, store(1, [0], [0]));
    await expect(runJob(d, load(1, [3], [0]))).resolves.toMatchObject({ jobId: 1, direction: 'cpuToGpu', ok: true });
  });

  it('synchronize resolves once every stream has drained', async () => {
    device = await openTestDevice({ model: { ...TINY_NO_COMPUTE, computeNsPerToken: 20_000_000 } });
    const d = device;
    d.setFaults({ delayMs: 60 });
    d.submitTransfer(store(1, [0], [0], { orderAfterCompute: false }));
    const forward = writeBlock(d, 3);
    let forwardDone = false;
    void forward.then(() => (forwardDone = true));
    await d.synchronize();
    expect(d.pendingJobs()).toBe(0);
    await Promise.resolve();
    expect(forwardDone).toBe(true);
  });
});
