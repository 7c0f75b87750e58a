import type { BlockHash } from '../core/block-hash.js';
import { ABSENT, LaneHashTable } from '../core/lane-hash-table.js';

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
  private readonly jobs = new JobTable();
  /** Store jobs in flight per request. */
  private readonly storesByRequest = new Map<string, number>();
  /** Keys some in-flight load is bringing in, with how many loads bring each. */
  private readonly loadingKeys = new Map<BlockHash, number>();

  /** Records a new job under a fresh id and returns it. */
  issue(kind: TransferJobKind, reqId: string | null, keys: readonly BlockHash[], numGpuBlocks: number): TrackedJob {
    const job: TrackedJob = { jobId: this.nextJobId++, kind, reqId, keys, numGpuBlocks };
    this.jobs.add(job);
    if (kind === 'store' && reqId !== null) this.storesByRequest.set(reqId, (this.storesByRequest.get(reqId) ?? 0) + 1);
    if (kind === 'load') for (const key of keys) this.loadingKeys.set(key, (this.loadingKeys.get(key) ?? 0) + 1);
    return job;
  }

  /** Removes and returns a finished job; undefined for an id not in flight (e.g. issued before a reset). */
  finish(jobId: number): TrackedJob | undefined {
    const job = this.jobs.take(jobId);
    if (job === undefined) return undefined;
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

/**
 * The jobs in flight by id: a typed-array hash table from id to a slot of
 * an array of jobs, with freed slots reused. Neither part shrinks, so a step
 * that issues thousands of one-block stores and the step that finishes them
 * reuse the same memory (a Map grows and shrinks its table with them).
 */
class JobTable {
  private readonly slotById = new LaneHashTable();
  private readonly slots: (TrackedJob | undefined)[] = [];
  private readonly freeSlots: number[] = [];

  get size(): number {
    return this.slotById.size;
  }

  add(job: TrackedJob): void {
    const slot = this.freeSlots.length > 0 ? (this.freeSlots.pop() as number) : this.slots.length;
    this.slots[slot] = job;
    this.slotById.set(lowLane(job.jobId), highLane(job.jobId), slot);
  }

  /** Removes and returns the job with `jobId`, or undefined. */
  take(jobId: number): TrackedJob | undefined {
    const a = lowLane(jobId);
    const b = highLane(jobId);
    const slot = this.slotById.get(a, b);
    if (slot === ABSENT) return undefined;
    this.slotById.delete(a, b);
    const job = this.slots[slot];
    this.slots[slot] = undefined;
    this.freeSlots.push(slot);
    return job;
  }

  clear(): void {
    this.slotById.clear();
    this.slots.length = 0;
    this.freeSlots.length = 0;
  }
}

/**
 * Job ids are safe integers: the low and high 32 bits as the table's two
 * lanes. The low bits are scrambled (an odd multiplier is a bijection):
 * consecutive ids would otherwise fill consecutive slots, one long run that
 * every delete scans to its end.
 */
function lowLane(jobId: number): number {
  return Math.imul(jobId >>> 0, 0x9e3779b1);
}

function highLane(jobId: number): number {
  return Math.floor(jobId / 0x100000000);
}
