/** The engine's limits; each is stated once, in src/config/limits.ts. */
export { DEFAULT_START_DEADLINE_MS, MAX_COMPUTE_NS_PER_TOKEN, MAX_CPU_BLOCKS, MAX_GPU_BLOCKS, MAX_TIMER_MS } from '../config/limits.js';
