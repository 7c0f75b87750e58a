import { loadAddon } from '../device/native.js';
import type { BackendName } from '../device/types.js';
import type { StepClock } from '../timing/step-cost.js';
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

/** How reports name the step clock: "llama-8b on h100-sxm x2 (NVIDIA H100 SXM 80GB, detected)", or its flat cost. */
export function describeStepClock(clock: StepClock, choice: GpuProfileChoice): string {
  return clock.usesProfile ? `${clock.description} (${choice.profile.label}, ${choice.source})` : clock.description;
}
