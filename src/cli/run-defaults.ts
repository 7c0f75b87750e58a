import { DEFAULT_MODEL, ENGINE_DEFAULTS } from '../config/engine-schema.js';

/**
 * What `kvtier run` (and `npm start`) uses when neither a flag nor the config
 * file says otherwise: the engine's defaults (src/config/engine-schema.ts),
 * except for the pool sizes and the host rank count. The pool sizes go with
 * the built-in multi-turn workload (see MULTITURN_DEFAULTS): the ~5k blocks
 * its live conversations hold on average (10k at the peak) are several times
 * the GPU pool, and the ~18k blocks they store fit the CPU tier, so the run
 * shows what the CPU tier saves. With the tiny model a block is 4 KiB over
 * all ranks: the GPU pool is 8 MiB, the CPU tier 128 MiB. Larger models need
 * smaller counts (or --cpu-bytes): a llama-8b block is 2 MiB.
 */
export const RUN_DEFAULTS = {
  model: DEFAULT_MODEL,
  layout: ENGINE_DEFAULTS.layout,
  blockSize: ENGINE_DEFAULTS.blockSize,
  gpuBlocks: 2048,
  cpuBlocks: 32768,
  offloadFactor: ENGINE_DEFAULTS.offloadFactor,
  eviction: ENGINE_DEFAULTS.eviction,
  storePolicy: ENGINE_DEFAULTS.storePolicy,
  faultSeed: ENGINE_DEFAULTS.faultSeed,
  failurePolicy: ENGINE_DEFAULTS.failurePolicy,
  /** Ranks on the host backend when --tp is not given. */
  hostTp: 2,
} as const;
