import { totalmem } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceError } from '../../src/device/errors.js';
import { loadAddon, resolveBackend } from '../../src/device/native.js';
import type { Device } from '../../src/device/types.js';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { bytesPerGpuBlock } from '../../src/model/shape.js';
import { TINY_NO_COMPUTE, fillGpuBlocks, load, openTestDevice, packBatch, runJob, store, type StepRequest } from './helpers.js';

let device: Device | undefined;
afterEach(() => {
  device?.close();
  device = undefined;
});

async function openDefault(): Promise<Device> {
  device = await openTestDevice({ numGpuBlocks: 16, numCpuBlocks: 8, offloadFactor: 2 });
  return device;
}

/** Asserts a DeviceError whose message contains every fragment. */
function expectDeviceError(call: () => unknown, ...fragments: string[]): void {
  let thrown: unknown;
  try {
    call();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(DeviceError);
  expect((thrown as DeviceError).code).toBe('ERR_KVTIER_DEVICE');
  for (const fragment of fragments) expect((thrown as Error).message).toContain(fragment);
}

async function expectOpenRejects(overrides: Parameters<typeof openTestDevice>[0], ...fragments: string[]) {
  const error = await openTestDevice(overrides).then(
    (d) => {
      d.close();
      return undefined;
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DeviceError);
  for (const fragment of fragments) expect((error as Error).message).toContain(fragment);
}

describe('opening a device with a bad shape or layout', () => {
  it('names the field and value', async () => {
    await expectOpenRejects({ tp: 3 }, 'model.kvHeads = 4', 'tp = 3');
    await expectOpenRejects({ rank: 2, tp: 2 }, 'rank = 2');
    await expectOpenRejects({ model: { ...TINY_NO_COMPUTE, headDim: 1 } }, 'model.headDim = 1');
    await expectOpenRejects({ layout: 'diagonal' as never }, "layout = 'diagonal'");
    await expectOpenRejects({ blockSize: 0 }, 'blockSize = 0');
    await expectOpenRejects({ numGpuBlocks: -1 }, 'numGpuBlocks = -1');
    await expectOpenRejects({ offloadFactor: 1.5 }, 'offloadFactor = 1.5');
    await expectOpenRejects({ cpuChunkBytes: 16 }, 'cpuChunkBytes = 16');
    await expectOpenRejects({ model: { ...TINY_NO_COMPUTE, layers: 'two' as never } }, 'model.layers must be an integer');
    await expectOpenRejects({ backend: 'tpu' as never }, 'tpu');
  });

  it('refuses more memory than the machine has instead of being killed for it', async () => {
    const llama = MODEL_PRESETS['llama-8b'];
    const numGpuBlocks = Math.ceil((2 * totalmem()) / bytesPerGpuBlock(llama, 1, 16));
    await expectOpenRejects({ model: llama, blockSize: 16, numGpuBlocks, numCpuBlocks: 0 }, 'this machine has');
  });

  it('asking for cuda where it is unavailable explains why', () => {
    let available = true;
    try {
      resolveBackend('cuda');
    } catch (error) {
      available = false;
      expect(error).toBeInstanceOf(DeviceError);
      expect((error as Error).message).toContain("backend 'cuda' is unavailable");
    }
    // Only a machine with a GPU and the cuda addon gets here without an error.
    if (available) expect(resolveBackend('auto')).toBe('cuda');
  });
});

describe('the copy method option', () => {
  it('refuses an unknown method, naming the field and the choices, before and inside the addon', async () => {
    await expectOpenRejects({ copyMethod: 'fast' as never }, "copyMethod = 'fast'", "'kernel', 'dma' or 'auto'");
    const options = {
      backend: 'host',
      rank: 0,
      tp: 1,
      model: TINY_NO_COMPUTE,
      blockSize: 4,
      layout: 'cross-layer',
      numGpuBlocks: 4,
      numCpuBlocks: 4,
      offloadFactor: 1,
    } as const;
    const { Device: NativeDevice } = loadAddon('host');
    expect(() => new NativeDevice({ ...options, copyMethod: 'fast' } as never)).toThrow(
      "copyMethod = 'fast' must be 'kernel', 'dma' or 'auto'",
    );
    expect(() => new NativeDevice({ ...options, copyMethod: 7 } as never)).toThrow('copyMethod must be a string');
  });

  it('is accepted by the host backend, whose copies are the same memcpy whichever is named', async () => {
    for (const copyMethod of ['kernel', 'dma', 'auto'] as const) {
      device = await openTestDevice({ numGpuBlocks: 8, numCpuBlocks: 4, offloadFactor: 2, copyMethod });
      const images = fillGpuBlocks(device, [0, 1, 2]);
      expect((await runJob(device, store(1, [0, 1, 2, 5], [1, 3]))).ok).toBe(true);
      expect((await runJob(device, load(2, [6, 7, 4], [1, 3], { firstSubBlock: 1 }))).ok).toBe(true);
      expect(device.readGpuBlock(6).equals(images.get(1)!)).toBe(true);
      expect(device.readGpuBlock(7).equals(images.get(2)!)).toBe(true);
      device.close();
      device = undefined;
    }
  });
});

describe('transfers with bad arguments', () => {
  it('refuse out-of-range ids, naming the list, index and value', async () => {
    const d = await openDefault();
    expectDeviceError(() => d.submitTransfer(store(1, [0, 16], [0])), 'gpuBlockIds[1] = 16', 'numGpuBlocks');
    expectDeviceError(() => d.submitTransfer(store(1, [0, 1], [8])), 'cpuBlockIds[0] = 8', 'numCpuBlocks');
    expectDeviceError(() => d.submitTransfer(store(1, [-1, 1], [0])), 'gpuBlockIds[0] = -1');
    expectDeviceError(() => d.submitTransfer(store(1, [0, 2 ** 32 + 1], [0])), 'gpuBlockIds[1] = 4294967297');
    expectDeviceError(() => d.submitTransfer(store(1, [0, 0.5], [0])), 'gpuBlockIds[1] = 0.5');
  });

  it('refuse id lists whose lengths do not match the offload factor', async () => {
    const d = await openDefault();
    expectDeviceError(
      () => d.submitTransfer(store(1, [0, 1, 2], [0])),
      'gpuBlockIds.length = 3',
      'offloadFactor = 1 * 2',
    );
    expectDeviceError(() => d.submitTransfer(load(1, [0, 1], [0], { firstSubBlock: 1 })), 'gpuBlockIds.length = 2');
    expectDeviceError(() => d.submitTransfer(load(1, [0], [0], { firstSubBlock: 2 })), 'firstSubBlock = 2');
    expectDeviceError(() => d.submitTransfer(store(1, [0, 1], [0], { firstSubBlock: 1 })), 'firstSubBlock = 1');
  });

  it('refuse a destination listed twice', async () => {
    const d = await openDefault();
    expectDeviceError(() => d.submitTransfer(load(1, [3, 3], [0])), 'gpuBlockIds lists block 3 more than once');
    expectDeviceError(() => d.submitTransfer(store(1, [0, 1, 2, 3], [5, 5])), 'cpuBlockIds lists block 5');
  });

  it('refuse a job id already in flight and an unknown after id', async () => {
    const d = await openDefault();
    d.setFaults({ delayMs: 50 });
    d.submitTransfer(store(7, [0, 1], [0]));
    expectDeviceError(() => d.submitTransfer(store(7, [2, 3], [1])), 'jobId = 7 is already in flight');
    const unknownAfter = load(8, [4, 5], [0], { after: [7, 12] });
    expectDeviceError(() => d.submitTransfer(unknownAfter), 'after[1] = 12', 'never submitted');
    expectDeviceError(() => d.submitTransfer(store(-3, [2, 3], [1])), 'jobId = -3');
    const sideways = { ...store(9, [2, 3], [1]), direction: 'sideways' as never };
    expectDeviceError(() => d.submitTransfer(sideways), "direction = 'sideways'");
    await d.waitJobs([7]);
  });

  it('refuse bad fault settings', async () => {
    const d = await openDefault();
    expectDeviceError(() => d.setFaults({ loadFailProbability: 1.5 }), 'loadFailProbability = 1.5');
    expectDeviceError(() => d.setFaults({ loadFailBlocks: [99] }), 'loadFailBlocks[0] = 99');
    expectDeviceError(() => d.setFaults({ delayMs: -1 }), 'delayMs = -1');
  });
});

describe('forward with a bad batch', () => {
  const good: StepRequest = { blockTable: [0, 1], startPosition: 0, tokens: [1, 2, 3], sample: true };

  async function expectForwardRejects(requests: StepRequest[], ...fragments: string[]) {
    const d = device ?? (await openDefault());
    const error = await d.forward(packBatch(requests)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DeviceError);
    for (const fragment of fragments) expect((error as Error).message).toContain(fragment);
  }

  it('names the offending request, array and value', async () => {
    await openDefault();
    await expectForwardRejects([{ ...good, blockTable: [0, 16] }], 'batch.blockTables[1] = 16');
    await expectForwardRejects([{ ...good, tokens: [1, 32000] }], 'batch.tokens[1] = 32000', 'vocabSize');
    await expectForwardRejects([good, { ...good, tokens: [] }], 'request 1 has no new tokens');
    await expectForwardRejects(
      [{ ...good, startPosition: 6 }],
      'request 0 writes positions up to 8',
      '2 blocks of 4 tokens',
    );
    await expectForwardRejects([{ ...good, startPosition: -1 }], 'batch.startPositions[0] = -1');
  });

  it('rejects inconsistent offsets', async () => {
    const d = await openDefault();
    const batch = { ...packBatch([good, good]), tokenOffsets: Int32Array.from([0, 4, 3]) };
    await expect(d.forward(batch)).rejects.toThrow('batch.tokenOffsets[2] = 3 is less than tokenOffsets[1] = 4');
    const short = { ...packBatch([good, good]), startPositions: Int32Array.from([0]) };
    await expect(d.forward(short)).rejects.toThrow('batch.startPositions.length = 1 must be numRequests = 2');
    const wrongType = { ...packBatch([good]), tokens: [1, 2, 3] as never };
    await expect(d.forward(wrongType)).rejects.toThrow('batch.tokens must be an Int32Array');
  });

  it('refuses a second forward while one is running', async () => {
    device = await openTestDevice({ model: { ...TINY_NO_COMPUTE, computeNsPerToken: 10_000_000 } });
    const running = device.forward(packBatch([good]));
    await expectForwardRejects([good], 'a forward is already running');
    await running;
  });
});

describe('block access with bad arguments', () => {
  it('names the block id and the size', async () => {
    const d = await openDefault();
    expectDeviceError(() => d.readGpuBlock(16), 'readGpuBlock: blockId = 16', 'numGpuBlocks');
    expectDeviceError(() => d.readCpuBlock(8), 'readCpuBlock: blockId = 8');
    expectDeviceError(() => d.writeGpuBlock(0, new Uint8Array(3)), 'data.length = 3', 'bytesPerGpuBlock');
    expectDeviceError(() => d.writeCpuBlock(0, new Uint8Array(3)), 'data.length = 3', 'bytesPerCpuBlock');
  });
});

describe('a closed device', () => {
  it('throws "device is closed" from every call and rejects pending waits', async () => {
    const d = await openTestDevice({ model: { ...TINY_NO_COMPUTE, computeNsPerToken: 50_000_000 } });
    const forward = d.forward(packBatch([{ blockTable: [0], startPosition: 0, tokens: [1], sample: true }]));
    d.setFaults({ delayMs: 1000 });
    d.submitTransfer(store(1, [0], [0]));
    const waiting = d.waitJobs([1]);
    d.close();
    await expect(forward).rejects.toThrow('device is closed');
    await expect(waiting).rejects.toThrow('device is closed');
    expectDeviceError(() => d.submitTransfer(store(2, [0], [0])), 'submitTransfer: device is closed');
    expectDeviceError(() => d.readGpuBlock(0), 'device is closed');
    expectDeviceError(() => d.pollFinished(), 'device is closed');
    expectDeviceError(() => d.pendingJobs(), 'device is closed');
    expectDeviceError(() => d.setFaults({}), 'device is closed');
    expectDeviceError(() => d.lastForwardDeviceSpan!(), 'lastForwardDeviceSpan: device is closed');
    await expect(d.synchronize()).rejects.toThrow('device is closed');
    await expect(d.waitJobs([1])).rejects.toThrow('device is closed');
    expect(() => d.close()).not.toThrow();
  });
});
