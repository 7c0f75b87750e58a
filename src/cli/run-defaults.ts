import { DEFAULT_MODEL, ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { POOL_DEFAULTS } from '../config/pool-defaults.js';

/**
 * What `kvtier run` (and `npm start`) uses when neither a flag nor the config
 * file says otherwise: the engine's defaults (src/config/engine-schema.ts),
 * except for the pool sizes (POOL_DEFAULTS.run, sized for the built-in
 * multi-turn workload) and the host rank count. Larger models need smaller
 * counts (or --cpu-bytes): a llama-8b block is 2 MiB.
 */
export const RUN_DEFAULTS = {
  model: DEFAULT_MODEL,
  layout: ENGINE_DEFAULTS.layout,
  blockSize: ENGINE_DEFAULTS.blockSize,
  gpuBlocks: POOL_DEFAULTS.run.gpuBlocks,
  cpuBlocks: POOL_DEFAULTS.run.cpuBlocks,
  offloadFactor: ENGINE_DEFAULTS.offloadFactor,
  eviction: ENGINE_DEFAULTS.eviction,
  storePolicy: ENGINE_DEFAULTS.storePolicy,
  faultSeed: ENGINE_DEFAULTS.faultSeed,
  failurePolicy: ENGINE_DEFAULTS.failurePolicy,
  /** Ranks on the host backend when --tp is not given. */
  hostTp: 2,
} as const;
