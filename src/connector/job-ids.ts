import type { BlockHash } from '../core/block-hash.js';

/**
 * Transfer jobs as the scheduler side tracks them: ids assigned here (unique
 * for the engine's lifetime, so a completion that arrives after a reset can
 * never be mistaken for a newer job), what each job in flight moves, and for
 * whom.
 */

export type TransferJobKind = 'load' | 'store';

export interface TrackedJob {
  readonly jobId: number;
  readonly kind: TransferJobKind;
  /** The request the job belongs to; null for write-back stores of evicted blocks. */
  readonly reqId: string | null;
  /** Offloaded-block keys the job moves: pinned by the load, or written by the store. */
  readonly keys: readonly BlockHash[];
  /** GPU blocks the job reads (store) or writes (load). */
  readonly numGpuBlocks: number;
}

export class TransferJobLedger {
  private nextJobId = 1;
  private readonly jobs = new Map<number, TrackedJob>();
  /** Store jobs in flight per request. */
  private readonly storesByRequest = new Map<string, number>();
  /** Keys some in-flight load is bringing in, with how many loads bring each. */
  private readonly loadingKeys = new Map<BlockHash, number>();

  /** Records a new job under a fresh id and returns it. */
  issue(kind: TransferJobKind, reqId: string | null, keys: readonly BlockHash[], numGpuBlocks: number): TrackedJob {
    const job: TrackedJob = { jobId: this.nextJobId++, kind, reqId, keys, numGpuBlocks };
    this.jobs.set(job.jobId, job);
    if (kind === 'store' && reqId !== null) this.storesByRequest.set(reqId, (this.storesByRequest.get(reqId) ?? 0) + 1);
    if (kind === 'load') for (const key of keys) this.loadingKeys.set(key, (this.loadingKeys.get(key) ?? 0) + 1);
    return job;
  }

  /** Removes and returns a finished job; undefined for an id not in flight (e.g. issued before a reset). */
  finish(jobId: number): TrackedJob | undefined {
    const job = this.jobs.get(jobId);
    if (job === undefined) return undefined;
    this.jobs.delete(jobId);
    if (job.kind === 'store' && job.reqId !== null) {
      const stores = (this.storesByRequest.get(job.reqId) ?? 1) - 1;
      if (stores > 0) this.storesByRequest.set(job.reqId, stores);
      else this.storesByRequest.delete(job.reqId);
    }
    if (job.kind === 'load') {
      for (const key of job.keys) {
        const count = (this.loadingKeys.get(key) ?? 1) - 1;
        if (count > 0) this.loadingKeys.set(key, count);
        else this.loadingKeys.delete(key);
      }
    }
    return job;
  }

  /** true while the request has store jobs issued and not finished. */
  hasStoresInFlight(reqId: string): boolean {
    return this.storesByRequest.has(reqId);
  }

  /** true while an in-flight load brings `key` in. */
  isBeingLoaded(key: BlockHash): boolean {
    return this.loadingKeys.has(key);
  }

  get size(): number {
    return this.jobs.size;
  }

  /** Forgets every job in flight; ids keep increasing. */
  clear(): void {
    this.jobs.clear();
    this.storesByRequest.clear();
    this.loadingKeys.clear();
  }
}
