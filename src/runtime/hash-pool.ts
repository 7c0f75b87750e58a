import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { blockHashes, blockHashKey, type BlockHash } from '../core/block-hash.js';
import type { HashTask } from './hash-task.js';
import { workerScript } from './worker-path.js';

/** Below this many prompt tokens a batch is hashed in place: a pool round trip would cost more. */
const POOL_THRESHOLD_TOKENS = 1 << 16;
/** Prompt tokens per pool task. */
const TASK_TOKENS = 1 << 18;

/**
 * Hashes the prompt blocks of large request batches in a piscina pool, off
 * the engine loop; small batches are hashed in place.
 */
export class PromptHashPool {
  private pool: Piscina | null = null;

  constructor(private readonly blockSize: number) {}

  async hash(prompts: readonly Int32Array[], salts: readonly (string | null)[]): Promise<BlockHash[][]> {
    const total = prompts.reduce((n, p) => n + p.length, 0);
    if (total < POOL_THRESHOLD_TOKENS) {
      return prompts.map((p, i) => blockHashes(p, this.blockSize, salts[i]));
    }
    const pool = this.ensurePool();
    const tasks: Promise<BlockHash[][]>[] = [];
    let start = 0;
    while (start < prompts.length) {
      let end = start;
      let tokens = 0;
      while (end < prompts.length && (end === start || tokens + prompts[end].length <= TASK_TOKENS)) tokens += prompts[end++].length;
      const task: HashTask = { prompts: prompts.slice(start, end), salts: salts.slice(start, end), blockSize: this.blockSize, key: blockHashKey() };
      tasks.push(pool.run(task) as Promise<BlockHash[][]>);
      start = end;
    }
    return (await Promise.all(tasks)).flat();
  }

  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = null;
    await pool?.destroy();
  }

  private ensurePool(): Piscina {
    this.pool ??= new Piscina({
      filename: workerScript('hash-worker'),
      maxThreads: Math.max(1, Math.min(4, availableParallelism() - 1)),
      idleTimeout: 5_000,
    });
    return this.pool;
  }
}
