/**
 * Upper bounds of the engine's settings, set by what its own structures can
 * hold, not only by device memory: the scheduler keeps one object per GPU
 * block in its pool and prefix cache, and the CPU tier's managers keep a Map
 * entry per block (a V8 Map holds at most 2^24 entries). The engine's config
 * schema (engine-schema.ts) states each bound once; the scheduler's config,
 * the CLI and the benches take their fields from it, so a size past a bound
 * is refused up front, naming the key or flag.
 */

/** Tensor-parallel ranks (worker threads). */
export const MAX_TP = 64;

/** Tokens per GPU block. */
export const MAX_BLOCK_SIZE = 4096;

/** GPU KV blocks per rank: the block pool's objects stay well inside a default V8 heap. */
export const MAX_GPU_BLOCKS = 2 ** 22;

/** CPU tier capacity in offloaded blocks (the V8 Map limit). */
export const MAX_CPU_BLOCKS = 2 ** 24 - 1;

/** GPU blocks per offloaded block. */
export const MAX_OFFLOAD_FACTOR = 64;

/** Requests running or waiting for KV at once. */
export const MAX_NUM_SEQS = 2 ** 20;

/** Tokens one step schedules. */
export const MAX_NUM_BATCHED_TOKENS = 2 ** 24;

/** Prompt + output tokens of one request. */
export const MAX_MODEL_LEN = 2 ** 24;

/** Seeds are unsigned 32-bit. */
export const MAX_SEED = 0xffffffff;

/** Emulated compute per token (ns, whole model), as the model shape allows. */
export const MAX_COMPUTE_NS_PER_TOKEN = 1e9;

/** Time a rank may take to open its device, at start and after a restart (ms), unless configured. */
export const DEFAULT_START_DEADLINE_MS = 120_000;

/** How long a remote-tier lookup or read may take before it counts as a miss (ms), unless configured. */
export const DEFAULT_REMOTE_TIMEOUT_MS = 250;

/** Attempts a remote write (a rank's shards, a block's manifest) gets when it fails transiently, unless configured. */
export const DEFAULT_REMOTE_WRITE_ATTEMPTS = 3;

/** Upper bound on remoteWriteAttempts: past a few, a failing server is down, not busy. */
export const MAX_REMOTE_WRITE_ATTEMPTS = 20;

/** Wait before a failed remote write's first retry (ms), doubling for each further one, unless configured. */
export const DEFAULT_REMOTE_RETRY_BACKOFF_MS = 100;

/** The longest wait a Node.js timer can express (ms); longer ones fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
