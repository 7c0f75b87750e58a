import { blockHashes } from '../src/core/block-hash.js';

export interface HashTask {
  readonly prompts: readonly Int32Array[];
  readonly salts: readonly (string | null)[];
  readonly blockSize: number;
}

/** piscina task: the chained block hashes of each prompt. */
export default function hashPrompts(task: HashTask): string[][] {
  return task.prompts.map((tokens, i) => blockHashes(tokens, task.blockSize, task.salts[i]));
}
