import type { ModelPresetName } from '../model/presets.js';
import type { KvLayout } from '../device/types.js';
import type { EvictionPolicyName, FailurePolicy, StorePolicyName } from '../runtime/engine-types.js';

/**
 * What `kvtier run` (and `npm start`) uses when neither a flag nor the config
 * file says otherwise. The pool sizes go with the built-in multi-turn
 * workload (see MULTITURN_DEFAULTS): its ~3k-block working set is three
 * times the GPU pool and fits the CPU tier, so the run shows what the CPU
 * tier saves. With the tiny model a block is 4 KiB over all ranks, so the
 * CPU tier is 16 MiB.
 */
export const RUN_DEFAULTS = {
  model: 'tiny' as ModelPresetName,
  layout: 'cross-layer' as KvLayout,
  blockSize: 16,
  gpuBlocks: 1024,
  cpuBlocks: 4096,
  offloadFactor: 1,
  eviction: 'lru' as EvictionPolicyName,
  storePolicy: 'on-compute' as StorePolicyName,
  faultSeed: 0,
  failurePolicy: 'recompute' as FailurePolicy,
  /** Ranks on the host backend when --tp is not given. */
  hostTp: 2,
} as const;
