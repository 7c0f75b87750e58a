import { loadAddon } from '../device/native.js';
import type { BackendName } from '../device/types.js';
import { DEFAULT_GPU_PROFILE, gpuProfile, profileOfDeviceName, type GpuProfile, type GpuProfileName } from '../timing/gpu-profiles.js';

/** The GPU profile a run's step clock and host link use, and how it was chosen. */
export interface GpuProfileChoice {
  readonly profile: GpuProfile;
  /** 'given' (config or --gpu), 'detected' (the CUDA device's own), or 'default' (h100-sxm). */
  readonly source: 'given' | 'detected' | 'default';
  /** On the CUDA backend, the device's name; else null. */
  readonly deviceName: string | null;
}

/**
 * The given profile, else on the CUDA backend the first device's own (when
 * a profile matches its name), else h100-sxm: a run without a GPU predicts
 * for the most common serving card.
 */
export function chooseGpuProfile(given: GpuProfileName | undefined, backend: BackendName): GpuProfileChoice {
  let deviceName: string | null = null;
  if (backend === 'cuda') {
    try {
      deviceName = loadAddon('cuda').cudaDeviceProperties(0).name;
    } catch {
      deviceName = null;
    }
  }
  if (given !== undefined) return { profile: gpuProfile(given), source: 'given', deviceName };
  const detected = deviceName === null ? null : profileOfDeviceName(deviceName);
  if (detected !== null) return { profile: gpuProfile(detected), source: 'detected', deviceName };
  return { profile: gpuProfile(DEFAULT_GPU_PROFILE), source: 'default', deviceName };
}

/** How reports name the profile: "h100-sxm (NVIDIA H100 SXM 80GB, detected)". */
export function describeGpuProfile(choice: GpuProfileChoice): string {
  return `${choice.profile.name} (${choice.profile.label}, ${choice.source})`;
}

/** How reports name the step clock: "llama-8b on h100-sxm x2 (NVIDIA H100 SXM 80GB, detected)". */
export function describeStepClock(model: string, choice: GpuProfileChoice, tp: number): string {
  return `${model} on ${choice.profile.name}${tp > 1 ? ` x${tp}` : ''} (${choice.profile.label}, ${choice.source})`;
}
