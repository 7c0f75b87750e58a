import { mix } from '../../src/model/mix.js';
import { SeededRandom } from '../../src/core/prng.js';
import { openDevice } from '../../src/device/device.js';
import type { Device, DeviceGeometry, DeviceOptions, ForwardBatch, TransferSubmission } from '../../src/device/types.js';
import { TINY_NO_COMPUTE } from '../support/tiny.js';

export { TINY_NO_COMPUTE };

/** Device options with the geometry's fields given one by one (any of them may be overridden). */
export type TestDeviceOptions = Partial<Omit<DeviceOptions, 'geometry'> & DeviceGeometry>;

/**
 * A small host device: tiny model, 4-token blocks, 16 GPU blocks, 8 CPU
 * blocks. The geometry is passed as given, unresolved, so the device's own
 * checks of it are what a bad value meets.
 */
export function openTestDevice(overrides: TestDeviceOptions = {}): Promise<Device> {
  const { model = TINY_NO_COMPUTE, tp = 1, blockSize = 4, offloadFactor = 1, layout = 'cross-layer', ...rest } = overrides;
  return openDevice({
    backend: 'host',
    rank: 0,
    deviceIndex: 0,
    numGpuBlocks: 16,
    numCpuBlocks: 8,
    ...rest,
    geometry: { model, tp, blockSize, offloadFactor, layout },
  });
}

/** Opens one device per rank of `tp`. */
export function openRanks(tp: number, overrides: TestDeviceOptions = {}): Promise<Device[]> {
  return Promise.all(Array.from({ length: tp }, (_, rank) => openTestDevice({ tp, rank, ...overrides })));
}

export function closeAll(devices: readonly Device[]): void {
  for (const device of devices) device.close();
}

/** Distinct, recognisable bytes for block image `tag`. */
export function patternImage(bytes: number, tag: number): Buffer {
  const image = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i += 4) image.writeUInt32LE(mix((tag * 0x10001 + i) >>> 0), i);
  return image;
}

/** Writes a distinct pattern into each GPU block and returns the images by block id. */
export function fillGpuBlocks(device: Device, ids: readonly number[], tagBase = 1): Map<number, Buffer> {
  const images = new Map<number, Buffer>();
  for (const id of ids) {
    const image = patternImage(device.info.bytesPerGpuBlock, tagBase + id);
    device.writeGpuBlock(id, image);
    images.set(id, image);
  }
  return images;
}

/** The images of the f sub-blocks a CPU block holds. */
export function subBlockImages(device: Device, cpuBlockId: number): Buffer[] {
  const image = device.readCpuBlock(cpuBlockId);
  const size = device.info.bytesPerGpuBlock;
  const parts: Buffer[] = [];
  for (let offset = 0; offset < image.length; offset += size) parts.push(image.subarray(offset, offset + size));
  return parts;
}

/** Hands out job ids in increasing order, as the scheduler does. */
export class JobIds {
  private next = 1;
  take(): number {
    return this.next++;
  }
}

/** Submits a job and waits for it; returns its result. */
export async function runJob(device: Device, job: TransferSubmission) {
  device.submitTransfer(job);
  await device.waitJobs([job.jobId]);
  const result = device.pollFinished().find((r) => r.jobId === job.jobId);
  if (!result) throw new Error(`job ${job.jobId} finished but was not reported`);
  return result;
}

type JobExtras = Partial<TransferSubmission>;

export function store(jobId: number, gpuBlockIds: number[], cpuBlockIds: number[], extra: JobExtras = {}) {
  return { jobId, direction: 'gpuToCpu' as const, gpuBlockIds, cpuBlockIds, ...extra };
}

export function load(jobId: number, gpuBlockIds: number[], cpuBlockIds: number[], extra: JobExtras = {}) {
  return { jobId, direction: 'cpuToGpu' as const, gpuBlockIds, cpuBlockIds, ...extra };
}

/** One request's part of a forward step. */
export interface StepRequest {
  readonly blockTable: readonly number[];
  readonly startPosition: number;
  readonly tokens: readonly number[];
  readonly sample: boolean;
}

export function packBatch(requests: readonly StepRequest[]): ForwardBatch {
  const blockTableOffsets = new Int32Array(requests.length + 1);
  const tokenOffsets = new Int32Array(requests.length + 1);
  requests.forEach((r, i) => {
    blockTableOffsets[i + 1] = blockTableOffsets[i] + r.blockTable.length;
    tokenOffsets[i + 1] = tokenOffsets[i] + r.tokens.length;
  });
  return {
    numRequests: requests.length,
    blockTableOffsets,
    blockTables: Int32Array.from(requests.flatMap((r) => [...r.blockTable])),
    startPositions: Int32Array.from(requests.map((r) => r.startPosition)),
    tokenOffsets,
    tokens: Int32Array.from(requests.flatMap((r) => [...r.tokens])),
    sample: Uint8Array.from(requests.map((r) => (r.sample ? 1 : 0))),
  };
}

/** Uniform draws in [0, 1) from the project's seeded generator, so random scenarios replay exactly. */
export function seededRandom(seed: number): () => number {
  const random = new SeededRandom(seed);
  return () => random.next();
}

export function randomInt(random: () => number, lo: number, hiInclusive: number): number {
  return lo + Math.floor(random() * (hiInclusive - lo + 1));
}

export function shuffled<T>(random: () => number, values: readonly T[]): T[] {
  const out = [...values];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

export function range(start: number, end: number): number[] {
  return Array.from({ length: end - start }, (_, i) => start + i);
}

/**
 * A load of CPU blocks 6 and 7, named after a delayed store that writes them
 * from GPU blocks 4 and 5, lands in GPU blocks 10 and 11: returns whether each
 * target holds what its source held (both true when `after` orders the load).
 */
export async function loadAfterDelayedStore(d: Device): Promise<[boolean, boolean]> {
  const jobs = new JobIds();
  const images = fillGpuBlocks(d, [4, 5]);
  d.setFaults({ delayMs: 150 });
  const write = store(jobs.take(), [4, 5], [6, 7]);
  d.submitTransfer(write);
  d.setFaults({});
  const read = load(jobs.take(), [10, 11], [6, 7], { after: [write.jobId] });
  d.submitTransfer(read);
  await d.waitJobs([read.jobId]);
  return [d.readGpuBlock(10).equals(images.get(4)!), d.readGpuBlock(11).equals(images.get(5)!)];
}
