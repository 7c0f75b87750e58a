import type { TransferDirection } from '../protocol/step-protocol.js';
import { DeviceError, toDeviceError } from './errors.js';
import { loadAddon, type NativeDevice } from './native.js';
import { COPY_METHODS } from './types.js';
import type {
  Device,
  DeviceFaults,
  DeviceInfo,
  DeviceJobResult,
  DeviceOptions,
  DeviceSpan,
  NativeDeviceOptions,
  FaultCounters,
  ForwardBatch,
  ForwardOptions,
  TransferSubmission,
} from './types.js';

/**
 * Opens a device on the backend named in the options: validates them (in the
 * addon), allocates the GPU buffer and the CPU tier off the JS thread
 * (reporting `onAllocProgress`), and starts the streams.
 */
export async function openDevice(options: DeviceOptions): Promise<Device> {
  if (options?.backend !== 'host' && options?.backend !== 'cuda') {
    throw new DeviceError(`backend = '${String(options?.backend)}' must be 'host' or 'cuda'`);
  }
  if (options.copyMethod !== undefined && !COPY_METHODS.includes(options.copyMethod)) {
    throw new DeviceError(`copyMethod = '${String(options.copyMethod)}' must be 'kernel', 'dma' or 'auto'`);
  }
  if (options.geometry === null || typeof options.geometry !== 'object') {
    throw new DeviceError(`geometry = ${String(options.geometry)} must be the KV geometry (model, tp, blockSize, offloadFactor, layout)`);
  }
  const addon = loadAddon(options.backend);
  let native: NativeDevice;
  try {
    native = new addon.Device(nativeOptions(options));
  } catch (error) {
    throw toDeviceError(error);
  }
  try {
    await native.whenOpen();
  } catch (error) {
    native.close();
    throw toDeviceError(error);
  }
  return new AddonDevice(native);
}

/** The addon reads one flat object: the geometry's fields beside the others. */
function nativeOptions({ geometry, ...rest }: DeviceOptions): NativeDeviceOptions {
  const { model, tp, blockSize, offloadFactor, layout } = geometry;
  return { ...rest, model, tp, blockSize, offloadFactor, layout };
}

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/**
 * Block ids cross into the addon as Int32Array. A plain array is converted
 * here, refusing values the conversion would silently wrap or truncate; the
 * addon range-checks them against the device.
 */
function toInt32Array(name: string, values: ArrayLike<number>): Int32Array {
  if (values instanceof Int32Array) return values;
  if (values == null || typeof values.length !== 'number') {
    throw new DeviceError(`${name} must be an array of block ids (got ${String(values)})`);
  }
  const out = new Int32Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isInteger(v) || v < INT32_MIN || v > INT32_MAX) {
      throw new DeviceError(`${name}[${i}] = ${String(v)} is not a 32-bit integer block id`);
    }
    out[i] = v;
  }
  return out;
}

/** The Device contract over the addon: every addon error becomes a DeviceError. */
class AddonDevice implements Device {
  readonly info: DeviceInfo;

  constructor(private readonly native: NativeDevice) {
    this.info = native.info();
  }

  submitTransfer(job: TransferSubmission): void {
    const gpuBlockIds = toInt32Array('submitTransfer: gpuBlockIds', job.gpuBlockIds);
    const cpuBlockIds = toInt32Array('submitTransfer: cpuBlockIds', job.cpuBlockIds);
    guard(() =>
      this.native.submitTransfer({
        jobId: job.jobId,
        direction: job.direction,
        gpuBlockIds,
        cpuBlockIds,
        firstSubBlock: job.firstSubBlock,
        orderAfterCompute: job.orderAfterCompute,
        after: job.after,
      }),
    );
  }

  pollFinished(): DeviceJobResult[] {
    return guard(() => this.native.pollFinished());
  }

  async waitJobs(jobIds: readonly number[]): Promise<void> {
    try {
      await this.native.waitJobs(jobIds);
    } catch (error) {
      throw toDeviceError(error);
    }
  }

  pendingJobs(): number {
    return guard(() => this.native.pendingJobs());
  }

  async forward(batch: ForwardBatch, options: ForwardOptions = {}): Promise<Uint32Array> {
    try {
      return await this.native.forward(batch, options);
    } catch (error) {
      throw toDeviceError(error);
    }
  }

  lastForwardDeviceMs(): number | null {
    return guard(() => this.native.lastForwardDeviceMs());
  }

  lastForwardDeviceSpan(): DeviceSpan | null {
    return guard(() => this.native.lastForwardDeviceSpan());
  }

  setFaults(faults: DeviceFaults): void {
    guard(() => this.native.setFaults(faults));
  }

  faultCounters(): FaultCounters {
    return guard(() => this.native.faultCounters());
  }

  async synchronize(): Promise<void> {
    try {
      await this.native.synchronize();
    } catch (error) {
      throw toDeviceError(error);
    }
  }

  async timeContiguousCopy(direction: TransferDirection, bytes: number): Promise<number> {
    try {
      return await this.native.timeContiguousCopy(direction, bytes);
    } catch (error) {
      throw toDeviceError(error);
    }
  }

  readGpuBlock(blockId: number): Buffer {
    return guard(() => this.native.readGpuBlock(blockId));
  }

  writeGpuBlock(blockId: number, data: Uint8Array): void {
    guard(() => this.native.writeGpuBlock(blockId, data));
  }

  readCpuBlock(blockId: number): Buffer {
    return guard(() => this.native.readCpuBlock(blockId));
  }

  writeCpuBlock(blockId: number, data: Uint8Array): void {
    guard(() => this.native.writeCpuBlock(blockId, data));
  }

  readCpuBlockInto(blockId: number, target: Uint8Array, offset = 0): number {
    return guard(() => this.native.readCpuBlockInto(blockId, target, offset));
  }

  writeCpuBlockFrom(blockId: number, source: Uint8Array, offset = 0): number {
    return guard(() => this.native.writeCpuBlockFrom(blockId, source, offset));
  }

  /** Idempotent: closing a closed device does nothing. */
  close(): void {
    this.native.close();
  }
}

function guard<T>(call: () => T): T {
  try {
    return call();
  } catch (error) {
    throw toDeviceError(error);
  }
}
