/**
 * Upper bounds of the engine's sizes, set by what its own structures can
 * hold, not only by device memory: the scheduler keeps one object per GPU
 * block in its pool and prefix cache, and the CPU tier's managers keep a Map
 * entry per block (a V8 Map holds at most 2^24 entries). The config schema
 * and the CLI both check them, so a size past them is refused up front.
 */

/** GPU KV blocks per rank: the block pool's objects stay well inside a default V8 heap. */
export const MAX_GPU_BLOCKS = 2 ** 22;

/** CPU tier capacity in offloaded blocks (the V8 Map limit). */
export const MAX_CPU_BLOCKS = 2 ** 24 - 1;

/** Emulated compute per token (ns, whole model), as the model shape allows. */
export const MAX_COMPUTE_NS_PER_TOKEN = 1e9;

/** Time a rank may take to open its device, at start and after a restart (ms), unless configured. */
export const DEFAULT_START_DEADLINE_MS = 120_000;

/** The longest wait a Node.js timer can express (ms); longer ones fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
