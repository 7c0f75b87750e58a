import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { TransferDirection } from '../protocol/step-protocol.js';
import { packageRoot } from '../core/package-root.js';
import { DeviceError } from './errors.js';
import type {
  BackendName,
  DeviceFaults,
  DeviceInfo,
  DeviceJobResult,
  DeviceSpan,
  NativeDeviceOptions,
  FaultCounters,
  ForwardBatch,
} from './types.js';

/**
 * Loading the native addons (native/build/Release/kvtier_{host,cuda}.node)
 * and choosing a backend. The cuda addon also reports how many GPUs it sees.
 */

/** The job shape the addon takes: block ids already converted to Int32Array. */
export interface NativeTransferJob {
  readonly jobId: number;
  readonly direction: TransferDirection;
  readonly gpuBlockIds: Int32Array;
  readonly cpuBlockIds: Int32Array;
  readonly firstSubBlock?: number;
  readonly orderAfterCompute?: boolean;
  readonly after?: readonly number[];
}

/** The addon's Device class (native/src/device_wrap.h). */
export interface NativeDevice {
  whenOpen(): Promise<void>;
  info(): DeviceInfo;
  submitTransfer(job: NativeTransferJob): void;
  pollFinished(): DeviceJobResult[];
  waitJobs(jobIds: readonly number[]): Promise<void>;
  pendingJobs(): number;
  forward(batch: ForwardBatch, options: { readonly after?: readonly number[] }): Promise<Uint32Array>;
  lastForwardDeviceMs(): number | null;
  lastForwardDeviceSpan(): DeviceSpan | null;
  setFaults(faults: DeviceFaults): void;
  faultCounters(): FaultCounters;
  synchronize(): Promise<void>;
  timeContiguousCopy(direction: TransferDirection, bytes: number): Promise<number>;
  readGpuBlock(blockId: number): Buffer;
  writeGpuBlock(blockId: number, data: Uint8Array): void;
  readCpuBlock(blockId: number): Buffer;
  writeCpuBlock(blockId: number, data: Uint8Array): void;
  readCpuBlockInto(blockId: number, target: Uint8Array, offset?: number): number;
  writeCpuBlockFrom(blockId: number, source: Uint8Array, offset?: number): number;
  close(): void;
}

export interface CudaDeviceProperties {
  readonly name: string;
  readonly totalMemoryBytes: number;
  readonly computeCapability: string;
  /** CUDA version the driver supports, e.g. 13000. */
  readonly driverVersion: number;
  /** CUDA runtime linked into the addon, e.g. 13000. */
  readonly runtimeVersion: number;
}

export interface NativeAddon {
  readonly Device: new (options: NativeDeviceOptions) => NativeDevice;
  readonly withCuda: boolean;
  cudaDeviceCount(): number;
  cudaDeviceProperties(deviceIndex: number): CudaDeviceProperties;
  /** The CUDA backend's per-job copy method rule (native/src/copy_method.h). */
  chooseCopyMethod(requested: string, copyBytes: number, copyRegions: number, besideCompute: boolean): 'kernel' | 'dma';
}

export function addonPath(backend: BackendName): string {
  return join(packageRoot(), 'native', 'build', 'Release', `kvtier_${backend}.node`);
}

// Per thread (module instances are per worker): an addon loads once.
const loaded = new Map<BackendName, NativeAddon | DeviceError>();

function load(backend: BackendName): NativeAddon | DeviceError {
  const cached = loaded.get(backend);
  if (cached) return cached;
  const file = addonPath(backend);
  let result: NativeAddon | DeviceError;
  if (!existsSync(file)) {
    result = new DeviceError(
      `the ${backend} addon is not built (${file} is missing; run \`node native/scripts/build.mjs\`${
        backend === 'cuda' ? ' on a machine with nvcc' : ''
      })`,
    );
  } else {
    try {
      result = createRequire(import.meta.url)(file) as NativeAddon;
    } catch (error) {
      result = new DeviceError(`the ${backend} addon failed to load: ${(error as Error).message}`, { cause: error });
    }
  }
  loaded.set(backend, result);
  return result;
}

/** The addon of `backend`; throws DeviceError when it is missing or does not load. */
export function loadAddon(backend: BackendName): NativeAddon {
  const addon = load(backend);
  if (addon instanceof DeviceError) throw addon;
  return addon;
}

/** GPUs the cuda addon sees; 0 when it is not built, does not load, or finds no driver. */
export function cudaDeviceCount(): number {
  const addon = load('cuda');
  if (addon instanceof DeviceError) return 0;
  try {
    return addon.cudaDeviceCount();
  } catch {
    return 0;
  }
}

/** Backends usable here: host when its addon loads, cuda when its addon loads and sees a GPU. */
export function availableBackends(): BackendName[] {
  const backends: BackendName[] = [];
  if (!(load('host') instanceof DeviceError)) backends.push('host');
  if (cudaDeviceCount() > 0) backends.push('cuda');
  return backends;
}

/** `auto` picks cuda when a GPU is usable, else host; an explicit backend must be usable. */
export function resolveBackend(requested: 'auto' | BackendName): BackendName {
  if (requested === 'auto') {
    if (cudaDeviceCount() > 0) return 'cuda';
    loadAddon('host');
    return 'host';
  }
  if (requested === 'host') {
    loadAddon('host');
    return 'host';
  }
  if (requested === 'cuda') {
    const addon = load('cuda');
    if (addon instanceof DeviceError) throw new DeviceError(`backend 'cuda' is unavailable: ${addon.message}`);
    if (cudaDeviceCount() === 0) {
      throw new DeviceError("backend 'cuda' is unavailable: the cuda addon found no CUDA device (or no driver)");
    }
    return 'cuda';
  }
  throw new DeviceError(`backend = '${String(requested)}' must be 'auto', 'host' or 'cuda'`);
}
