import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { KvtierError } from '../core/errors.js';
import { elementsPerToken, type ModelShape } from '../model/shape.js';
import type { FinishedRequest } from '../runtime/engine-types.js';
import {
  toIntegrityItem,
  type IntegrityBatchResult,
  type IntegrityItem,
  type IntegrityMismatch,
  type IntegrityTask,
} from './integrity-check.js';
import { compiledWorkerPath } from '../core/package-root.js';
import { ERROR_CODES } from '../core/error-codes.js';

/**
 * Checks finished requests against the reference model off the main thread,
 * in a piscina pool running dist/workers/integrity-worker.js. Requests are
 * sent in batches of roughly equal work (positions x KV elements), so a run
 * of thousands of requests costs a few hundred tasks, not thousands.
 */

export interface IntegritySummary {
  /** Requests compared with the reference (those that finished with 'length' or 'stopped'). */
  readonly checked: number;
  readonly mismatches: number;
  /** The first mismatches found: request id and first differing output index. */
  readonly examples: readonly IntegrityMismatch[];
  /** Requests left out because they were aborted or failed. */
  readonly skipped: number;
}

export interface IntegrityCheckerOptions {
  /** Pool threads (default: half the cores, at least 1; the engine's rank workers need the rest). */
  readonly threads?: number;
  /** Work per task in KV element evaluations (default 64M, roughly 0.3 s of one core). */
  readonly batchWork?: number;
  /** The compiled worker (default: <package root>/dist/workers/integrity-worker.js). */
  readonly workerFile?: string;
}

const MAX_EXAMPLES = 10;

export class IntegrityWorkerMissingError extends KvtierError {
  constructor(file: string) {
    super(ERROR_CODES.build, `integrity worker ${file} is missing: build kvtier first (npm run build:ts)`);
  }
}

export function integrityWorkerPath(): string {
  return compiledWorkerPath('integrity-worker');
}

export class IntegrityChecker {
  private readonly pool: Piscina<IntegrityTask, IntegrityBatchResult>;
  private readonly batchWork: number;
  private readonly workPerPosition: number;
  private readonly tasks: Promise<IntegrityBatchResult>[] = [];
  private batch: IntegrityItem[] = [];
  private batchCost = 0;
  private skipped = 0;

  constructor(
    private readonly shape: ModelShape,
    options: IntegrityCheckerOptions = {},
  ) {
    const workerFile = options.workerFile ?? integrityWorkerPath();
    if (!existsSync(workerFile)) throw new IntegrityWorkerMissingError(workerFile);
    const threads = options.threads ?? Math.max(1, Math.floor(availableParallelism() / 2));
    this.pool = new Piscina({ filename: workerFile, minThreads: 0, maxThreads: threads, idleTimeout: 1000 });
    this.batchWork = options.batchWork ?? 64_000_000;
    this.workPerPosition = elementsPerToken(shape);
  }

  /** Queues a finished request; aborted and failed ones are counted as skipped. */
  add(finished: FinishedRequest): void {
    const item = toIntegrityItem(finished);
    if (item === null) {
      this.skipped++;
      return;
    }
    this.batch.push(item);
    this.batchCost += (item.promptTokens.length + item.outputTokens.length) * this.workPerPosition;
    if (this.batchCost >= this.batchWork) this.dispatch();
  }

  /** Checks what is queued, waits for every task and shuts the pool down (call once, after the last add). */
  async finish(): Promise<IntegritySummary> {
    this.dispatch();
    try {
      const results = await Promise.all(this.tasks);
      const mismatches = results.flatMap((r) => r.mismatches);
      return {
        checked: results.reduce((sum, r) => sum + r.checked, 0),
        mismatches: mismatches.length,
        examples: mismatches.slice(0, MAX_EXAMPLES),
        skipped: this.skipped,
      };
    } finally {
      await this.pool.destroy();
    }
  }

  private dispatch(): void {
    if (this.batch.length === 0) return;
    const task = this.pool.run({ shape: this.shape, items: this.batch });
    // finish() reports failures; until then keep a rejected task from counting as unhandled.
    task.catch(() => {});
    this.tasks.push(task);
    this.batch = [];
    this.batchCost = 0;
  }
}
