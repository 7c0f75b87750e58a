import { ConfigError } from '../core/errors.js';
import { MODEL_PRESETS, type ModelPresetName } from '../model/presets.js';
import { bytesPerGpuBlock, type ModelShape } from '../model/shape.js';
import type { SimulatedLink } from '../sim/simulated-device.js';
import { DEFAULT_GPU_PROFILE, gpuProfile, type GpuProfile } from '../timing/gpu-profiles.js';
import { stepClockFor, type StepClock } from '../timing/step-cost.js';

/**
 * The clock a simulated replay keeps (docs/architecture.md, "The step
 * clock"). `modelled`: each step lasts what the step clock prices it for the
 * timed model on the GPU profile, and transfers take what the profile's host
 * link takes, so arrivals meet the queue a deployment would have. `fixed`: a
 * set number of trace milliseconds per step, and transfers take one step.
 */
export type ReplayClock =
  | { readonly kind: 'modelled'; readonly model: ModelShape; readonly gpu: GpuProfile; readonly tp: number }
  | { readonly kind: 'fixed'; readonly msPerStep: number };

/** The model a sweep times its steps for unless told otherwise. */
export const DEFAULT_TIMED_MODEL: ModelPresetName = 'llama-8b';

/** The replay clock of a run that names nothing: llama-8b on an H100, tp 1. */
export function defaultReplayClock(): ReplayClock {
  return { kind: 'modelled', model: MODEL_PRESETS[DEFAULT_TIMED_MODEL], gpu: gpuProfile(DEFAULT_GPU_PROFILE), tp: 1 };
}

export function fixedReplayClock(msPerStep: number): ReplayClock {
  if (!(msPerStep > 0) || !Number.isFinite(msPerStep)) throw new ConfigError(`trace ms per step must be a positive number, got ${msPerStep}`);
  return { kind: 'fixed', msPerStep };
}

/** How reports name the clock. */
export function describeReplayClock(clock: ReplayClock): string {
  if (clock.kind === 'fixed') return `${clock.msPerStep} trace ms per step (fixed)`;
  return `${stepClockFor(clock.model, clock.gpu, clock.tp).description} (modelled)`;
}

/** The step clock and host link sizes a modelled replay runs on; null for a fixed clock. */
export function modelledParts(clock: ReplayClock, blockSize: number): { readonly stepClock: StepClock; readonly link: SimulatedLink } | null {
  if (clock.kind === 'fixed') return null;
  return {
    stepClock: stepClockFor(clock.model, clock.gpu, clock.tp),
    // The cross-layer layout: a GPU block is one contiguous region.
    link: { profile: clock.gpu.link, bytesPerGpuBlock: bytesPerGpuBlock(clock.model, clock.tp, blockSize), regionsPerGpuBlock: 1 },
  };
}
