import { hashPrompts } from '../src/runtime/hash-task.js';

/** piscina entry point of the prompt-hashing pool (src/runtime/hash-pool.ts). */
export default hashPrompts;
