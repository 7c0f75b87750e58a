import { existsSync } from 'node:fs';
import { Piscina } from 'piscina';
import type { ModelShape } from '../model/shape.js';
import { toIntegrityItem, type IntegrityBatchResult, type IntegrityMismatch, type IntegrityTask } from '../report/integrity-check.js';
import { integrityWorkerPath, IntegrityWorkerMissingError } from '../report/integrity.js';
import type { FinishedRequest } from '../runtime/engine-types.js';

/**
 * `kvtier serve --verify`: every request that finished (length or stop) is
 * checked against the reference model as it finishes, in the integrity
 * worker pool (off the serving loop), and the counts are live: /metrics
 * shows them while the server runs. Aborted and failed requests have no full
 * output to compare and are counted as skipped.
 */
export interface VerifyCounts {
  readonly checked: number;
  readonly mismatches: number;
  readonly skipped: number;
  /** Checks that could not run (the pool failed); never counted as passed. */
  readonly errors: number;
  /** The latest mismatches (request id, first differing index). */
  readonly examples: readonly IntegrityMismatch[];
}

const MAX_EXAMPLES = 10;

export class LiveVerifier {
  private readonly pool: Piscina<IntegrityTask, IntegrityBatchResult>;
  private readonly inFlight = new Set<Promise<void>>();
  private checked = 0;
  private mismatches = 0;
  private skipped = 0;
  private errors = 0;
  private readonly examples: IntegrityMismatch[] = [];

  constructor(
    private readonly shape: ModelShape,
    /** Called for every mismatch found (e.g. to log it). */
    private readonly onMismatch: (mismatch: IntegrityMismatch) => void = () => {},
    threads = 1,
  ) {
    const workerFile = integrityWorkerPath();
    if (!existsSync(workerFile)) throw new IntegrityWorkerMissingError(workerFile);
    this.pool = new Piscina({ filename: workerFile, minThreads: 0, maxThreads: threads, idleTimeout: 1000 });
  }

  add(finished: FinishedRequest): void {
    const item = toIntegrityItem(finished);
    if (item === null) {
      this.skipped++;
      return;
    }
    const check = this.pool.run({ shape: this.shape, items: [item] }).then(
      (result) => {
        this.checked += result.checked;
        for (const mismatch of result.mismatches) {
          this.mismatches++;
          this.examples.push(mismatch);
          if (this.examples.length > MAX_EXAMPLES) this.examples.shift();
          this.onMismatch(mismatch);
        }
      },
      () => {
        this.errors++;
      },
    );
    this.inFlight.add(check);
    void check.finally(() => this.inFlight.delete(check));
  }

  counts(): VerifyCounts {
    return { checked: this.checked, mismatches: this.mismatches, skipped: this.skipped, errors: this.errors, examples: this.examples.slice() };
  }

  /** Waits for the checks under way (e.g. before a final report), then stops the pool. */
  async close(): Promise<VerifyCounts> {
    await Promise.all([...this.inFlight]);
    await this.pool.destroy();
    return this.counts();
  }
}
