import { blockHashes } from '../core/block-hash.js';

/** One batch of prompts for the hashing pool (hash-pool.ts). */
export interface HashTask {
  readonly prompts: readonly Int32Array[];
  readonly salts: readonly (string | null)[];
  readonly blockSize: number;
}

/** The chained block hashes of each prompt in the task. */
export function hashPrompts(task: HashTask): string[][] {
  return task.prompts.map((tokens, i) => blockHashes(tokens, task.blockSize, task.salts[i]));
}
