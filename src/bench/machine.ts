import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { cudaDeviceCount, loadAddon } from '../device/native.js';
import type { BackendName } from '../device/types.js';

/** The machine a bench ran on, recorded beside its results. */
export interface MachineDescription {
  /** CPU model and logical core count. */
  readonly cpu: string;
  readonly memoryGiB: number;
  /** GPU name (with a count when several), or null on the host backend. */
  readonly gpu: string | null;
  /** NVIDIA driver and the CUDA version it supports, or null on the host backend. */
  readonly driver: string | null;
  readonly node: string;
  readonly os: string;
}

export function describeMachine(backend: BackendName): MachineDescription {
  const cpus = os.cpus();
  const model = cpus[0]?.model.trim() || 'unknown CPU';
  return {
    cpu: `${model} (${os.availableParallelism()} cores)`,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    gpu: backend === 'cuda' ? describeGpus() : null,
    driver: backend === 'cuda' ? describeDriver() : null,
    node: process.version,
    os: `${os.type()} ${os.release()} (${os.arch()})`,
  };
}

function describeGpus(): string | null {
  const count = cudaDeviceCount();
  if (count === 0) return null;
  const name = loadAddon('cuda').cudaDeviceProperties(0).name;
  return count === 1 ? name : `${count} x ${name}`;
}

/** e.g. "580.65.06 (CUDA 13.0)": the kernel module's version when readable, and the driver's CUDA version. */
function describeDriver(): string | null {
  if (cudaDeviceCount() === 0) return null;
  const { driverVersion } = loadAddon('cuda').cudaDeviceProperties(0);
  const cuda = `CUDA ${Math.floor(driverVersion / 1000)}.${Math.floor((driverVersion % 1000) / 10)}`;
  const module = kernelModuleVersion();
  return module ? `${module} (${cuda})` : cuda;
}

function kernelModuleVersion(): string | null {
  const file = '/proc/driver/nvidia/version';
  if (!existsSync(file)) return null;
  const match = /Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)/.exec(readFileSync(file, 'utf8'));
  return match ? match[1] : null;
}
