import { blockHashes, blockHashKey, setBlockHashKey, type BlockHashKey } from '../core/block-hash.js';

/** One batch of prompts for the hashing pool (hash-pool.ts). */
export interface HashTask {
  readonly prompts: readonly Int32Array[];
  readonly salts: readonly (string | null)[];
  readonly blockSize: number;
  /** The scheduler's block-hash key: a pool thread draws its own at start, and must hash under this one. */
  readonly key: BlockHashKey;
}

/** The chained block hashes of each prompt in the task, under the task's key. */
export function hashPrompts(task: HashTask): string[][] {
  const mine = blockHashKey();
  if (!sameKey(mine, task.key)) setBlockHashKey(task.key);
  return task.prompts.map((tokens, i) => blockHashes(tokens, task.blockSize, task.salts[i]));
}

function sameKey(a: BlockHashKey, b: BlockHashKey): boolean {
  return a[0] === b[0] && a[1] === b[1] && a[2] === b[2] && a[3] === b[3];
}
