import { afterEach, describe, expect, it } from 'vitest';
import { kvGeometry } from '../../src/core/kv-geometry.js';
import { crc32c } from '../../src/core/crc32c.js';
import { DeviceError } from '../../src/device/errors.js';
import { cudaDeviceCount } from '../../src/device/native.js';
import type { BackendName, Device, KvLayout } from '../../src/device/types.js';
import { SimulatedDevice } from '../../src/sim/simulated-device.js';
import { openTestDevice, patternImage, TINY_NO_COMPUTE } from './helpers.js';

/**
 * readCpuBlockInto / writeCpuBlockFrom: the remote tier's one-pass copy of a
 * CPU block into a value (after its header) and back, with the CRC-32C of
 * the block's bytes.
 */

const HEADER = 68;
const SENTINEL = 0xa5;

let devices: Device[] = [];
afterEach(() => {
  for (const d of devices) d.close();
  devices = [];
});

async function addonDevice(layout: KvLayout, backend: BackendName = 'host'): Promise<Device> {
  // Two sub-blocks per CPU block, and chunks of 3 CPU blocks: the block spans segments and the tier spans chunks.
  const probe = await openTestDevice({ backend, layout, offloadFactor: 2, numCpuBlocks: 1 });
  const bytes = probe.info.bytesPerCpuBlock;
  probe.close();
  const d = await openTestDevice({ backend, layout, offloadFactor: 2, numCpuBlocks: 7, cpuChunkBytes: 3 * bytes });
  devices.push(d);
  return d;
}

function simulatedDevice(): Device {
  const d = new SimulatedDevice({
    geometry: kvGeometry({ model: TINY_NO_COMPUTE, tp: 1, blockSize: 4, offloadFactor: 2 }),
    numGpuBlocks: 4,
    numCpuBlocks: 4,
  });
  devices.push(d);
  return d;
}

/** Bytes of a CPU block's image (the simulated device's images are chain states, shorter than bytesPerCpuBlock). */
function imageBytes(d: Device): number {
  return d.readCpuBlock(0).length;
}

/** A value-sized buffer: sentinel bytes around room for one block at HEADER. */
function valueBuffer(d: Device): Buffer {
  return Buffer.alloc(HEADER + imageBytes(d) + 16, SENTINEL);
}

function expectUntouchedOutside(buffer: Buffer, start: number, end: number): void {
  expect(buffer.subarray(0, start).every((b) => b === SENTINEL)).toBe(true);
  expect(buffer.subarray(end).every((b) => b === SENTINEL)).toBe(true);
}

/** Asserts the call throws an Error whose message names every fragment, and returns it. */
function thrown(call: () => unknown, ...fragments: string[]): Error {
  let error: unknown;
  try {
    call();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(Error);
  for (const fragment of fragments) expect((error as Error).message).toContain(fragment);
  return error as Error;
}

function blockImage(d: Device, tag: number): Buffer {
  return patternImage(imageBytes(d), tag);
}

const subjects: [string, () => Promise<Device>][] = [
  ['the host addon, cross-layer', () => addonDevice('cross-layer')],
  ['the host addon, per-layer', () => addonDevice('per-layer')],
  ['the simulated device', async () => simulatedDevice()],
  // The CUDA backend's CPU tier is pinned host memory; only where a GPU is seen.
  ...(cudaDeviceCount() > 0 ? ([['the cuda addon, per-layer', () => addonDevice('per-layer', 'cuda')]] as [string, () => Promise<Device>][]) : []),
];

describe.each(subjects)('CPU block copies with a checksum on %s', (_, open) => {
  it('copies a block into a value at an offset and returns the CRC-32C of its bytes', async () => {
    const d = await open();
    for (const id of [0, 3]) {
      const image = blockImage(d, 10 + id);
      d.writeCpuBlock(id, image);
      const value = valueBuffer(d);
      const checksum = d.readCpuBlockInto(id, value, HEADER);
      expect(value.subarray(HEADER, HEADER + image.length).equals(image)).toBe(true);
      expectUntouchedOutside(value, HEADER, HEADER + image.length);
      expect(checksum).toBe(crc32c(image));
    }
  });

  it('writes a block from a value at an offset and returns the CRC-32C of what it wrote', async () => {
    const d = await open();
    const image = blockImage(d, 42);
    const value = valueBuffer(d);
    image.copy(value, HEADER);
    expect(d.writeCpuBlockFrom(1, value, HEADER)).toBe(crc32c(image));
    expect(d.readCpuBlock(1).equals(image)).toBe(true);
    expect(d.readCpuBlock(2).equals(image)).toBe(false);
  });

  it('a changed byte in the value gives a different checksum than the header would carry', async () => {
    const d = await open();
    const image = blockImage(d, 7);
    const value = valueBuffer(d);
    image.copy(value, HEADER);
    value[HEADER + image.length - 2] ^= 0x10;
    expect(d.writeCpuBlockFrom(0, value, HEADER)).not.toBe(crc32c(image));
  });

  it('offset defaults to 0, and a block fits exactly at the end of a buffer', async () => {
    const d = await open();
    const image = blockImage(d, 3);
    expect(d.writeCpuBlockFrom(0, image)).toBe(crc32c(image));
    const exact = Buffer.alloc(HEADER + image.length);
    expect(d.readCpuBlockInto(0, exact, HEADER)).toBe(crc32c(image));
    expect(exact.subarray(HEADER).equals(image)).toBe(true);
  });

  it('refuses a buffer too short for the block at that offset, naming the offset and the lengths', async () => {
    const d = await open();
    const size = imageBytes(d);
    const value = Buffer.alloc(HEADER + size);
    thrown(() => d.readCpuBlockInto(0, value, HEADER + 1), 'readCpuBlockInto: offset = 69', `${size}`, `target.length = ${HEADER + size}`);
    thrown(() => d.writeCpuBlockFrom(0, value, HEADER + 1), 'writeCpuBlockFrom: offset = 69', `source.length = ${HEADER + size}`);
    thrown(() => d.readCpuBlockInto(0, Buffer.alloc(3)), 'offset = 0', 'target.length = 3');
    thrown(() => d.readCpuBlockInto(0, value, 2 ** 40), 'offset');
  });

  it('refuses a bad offset, buffer or block id with an error naming it, and keeps working', async () => {
    const d = await open();
    const value = valueBuffer(d);
    thrown(() => d.readCpuBlockInto(0, value, -1), 'offset');
    thrown(() => d.readCpuBlockInto(0, value, 1.5), 'offset');
    thrown(() => d.writeCpuBlockFrom(0, value, Number.NaN), 'offset');
    thrown(() => d.readCpuBlockInto(0, new Int32Array(1024) as unknown as Uint8Array, 0), 'target', 'Uint8Array');
    thrown(() => d.writeCpuBlockFrom(0, 'bytes' as unknown as Uint8Array, 0), 'source', 'Uint8Array');
    thrown(() => d.readCpuBlockInto(-1, value, HEADER), '-1');
    thrown(() => d.writeCpuBlockFrom(1000, value, HEADER), '1000');
    const image = blockImage(d, 5);
    d.writeCpuBlock(0, image);
    expect(d.readCpuBlockInto(0, value, HEADER)).toBe(crc32c(image));
  });
});

describe('the addon calls at the boundary', () => {
  it('raise DeviceErrors naming the call and the argument', async () => {
    const d = await addonDevice('cross-layer');
    const value = valueBuffer(d);
    const size = d.info.bytesPerCpuBlock;
    for (const error of [
      thrown(() => d.readCpuBlockInto(0, Buffer.alloc(size), 1), 'readCpuBlockInto: offset = 1', `bytesPerCpuBlock = ${size}`, `target.length = ${size}`),
      thrown(() => d.readCpuBlockInto(7, value, HEADER), 'readCpuBlockInto: blockId = 7', 'numCpuBlocks'),
      thrown(() => d.writeCpuBlockFrom(0, new Int32Array(4) as unknown as Uint8Array), 'writeCpuBlockFrom: source must be a Uint8Array or Buffer'),
      thrown(() => d.readCpuBlockInto(0, value, 'x' as unknown as number), 'readCpuBlockInto: offset'),
    ]) {
      expect(error).toBeInstanceOf(DeviceError);
    }
  });

  it('throw "device is closed" once the device is closed', async () => {
    const d = await addonDevice('cross-layer');
    d.close();
    thrown(() => d.readCpuBlockInto(0, valueBuffer(d), HEADER), 'device is closed');
    thrown(() => d.writeCpuBlockFrom(0, valueBuffer(d), HEADER), 'device is closed');
  });

  it('checksum a large block as the table version does', async () => {
    const d = await openTestDevice({ model: { ...TINY_NO_COMPUTE, layers: 8 }, blockSize: 64, numCpuBlocks: 2 });
    devices.push(d);
    const image = patternImage(d.info.bytesPerCpuBlock, 99);
    expect(d.writeCpuBlockFrom(1, image)).toBe(crc32c(image));
    const out = Buffer.alloc(image.length + 5);
    expect(d.readCpuBlockInto(1, out, 5)).toBe(crc32c(image));
  });
});
