/**
 * The GPU pool and CPU tier sizes, in blocks, each workload takes when no
 * flag, config file or option sizes them: one table, so a workload's sizes
 * and the reason for them are read in one place.
 */
export const POOL_DEFAULTS = {
  /** The library's engine: a GPU pool only (offloading needs cpuBlocks or cpuBytes). */
  engine: { gpuBlocks: 1024 },
  /**
   * `kvtier run` and `analyze` with the built-in multi-turn workload: the ~5k
   * blocks its live conversations hold on average (10k at the peak) are
   * several times the GPU pool, and the ~18k blocks they store fit the CPU
   * tier, so a run shows what the tier saves. With the tiny model a block is
   * 4 KiB over all ranks: 8 MiB of GPU pool, 128 MiB of CPU tier.
   */
  run: { gpuBlocks: 2048, cpuBlocks: 32_768 },
  /** `kvtier sweep`: the CPU tier capacities of its grid, over a 1,000-request trace slice. */
  sweep: { gpuBlocks: 1024, cpuBlocks: [2000, 4000, 8000, 16_000] },
  /** `kvtier bench e2e`: the engine's pools for its trace slice (offload off, then on). */
  benchE2e: { gpuBlocks: 512, cpuBlocks: 4096 },
  /** `kvtier bench share`: the pools of each of the two engines sharing one remote tier. */
  benchShare: { gpuBlocks: 512, cpuBlocks: 1024 },
  /** `kvtier bench scheduler`: a CPU tier of this many times the GPU pool, which the bench never fills. */
  benchSchedulerCpuPerGpuBlock: 4,
} as const;
