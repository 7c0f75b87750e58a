import type { ModelPresetName } from '../model/presets.js';
import type { KvLayout } from '../device/types.js';
import type { EvictionPolicyName, FailurePolicy, StorePolicyName } from '../runtime/engine-types.js';

/**
 * What `kvtier run` (and `npm start`) uses when neither a flag nor the config
 * file says otherwise. The pool sizes go with the built-in multi-turn
 * workload (see MULTITURN_DEFAULTS): the ~5k blocks its live conversations
 * hold on average (10k at the peak) are several times the GPU pool, and the ~18k blocks they store fit the
 * CPU tier, so the run shows what the CPU tier saves. With the tiny model a
 * block is 4 KiB over all ranks: the GPU pool is 8 MiB, the CPU tier 128 MiB.
 * Larger models need smaller counts (or --cpu-bytes): a llama-8b block is 2 MiB.
 */
export const RUN_DEFAULTS = {
  model: 'tiny' as ModelPresetName,
  layout: 'cross-layer' as KvLayout,
  blockSize: 16,
  gpuBlocks: 2048,
  cpuBlocks: 32768,
  offloadFactor: 1,
  eviction: 's3fifo+queue' as EvictionPolicyName,
  storePolicy: 'on-compute' as StorePolicyName,
  faultSeed: 0,
  failurePolicy: 'recompute' as FailurePolicy,
  /** Ranks on the host backend when --tp is not given. */
  hostTp: 2,
} as const;
