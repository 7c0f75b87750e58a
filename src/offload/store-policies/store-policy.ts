import type { BlockHash } from '../../core/block-hash.js';
import { ConfigError } from '../../core/errors.js';
import type { KvGeometry } from '../../core/kv-geometry.js';
import type { StepView } from '../../scheduler/connector-port.js';
import type { TransferJobSpec } from '../../protocol/step-protocol.js';
import type { Request } from '../../scheduler/request.js';

/**
 * A store policy decides which offloaded blocks go to the CPU tier and when
 * (docs/architecture.md, "Offloading"). It owns its progress marks; the connector owns the
 * manager, the job ids and the step metadata, and lends them through a
 * StoreContext. A policy's marks advance only over blocks the manager
 * accepted (stored now, or already held).
 */

/** The block geometry policies work in (a KvGeometry is one). */
export type OffloadGeometry = Pick<KvGeometry, 'blockSize' | 'offloadFactor' | 'offloadedBlockTokens'>;

/** The geometry of GPU blocks of `blockSize` tokens grouped `offloadFactor` to an offloaded block. */
export function offloadGeometry(blockSize: number, offloadFactor: number): OffloadGeometry {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) {
    throw new ConfigError(`blockSize must be an integer >= 1, got ${String(blockSize)}`);
  }
  if (!Number.isSafeInteger(offloadFactor) || offloadFactor < 1) {
    throw new ConfigError(`offloadFactor must be an integer >= 1, got ${String(offloadFactor)}`);
  }
  return { blockSize, offloadFactor, offloadedBlockTokens: blockSize * offloadFactor };
}

/** One offloaded block offered for storing: its key and its f GPU blocks, in order. */
export interface StoreCandidate {
  readonly key: BlockHash;
  readonly gpuBlockIds: readonly number[];
}

/** What the manager made of one offer. */
export interface StoreResult {
  /** The job writing the accepted blocks, or null when nothing needed writing. */
  readonly job: TransferJobSpec | null;
  /** Keys the manager's admission declined (neither held nor stored now). */
  readonly declinedKeys: ReadonlySet<BlockHash>;
}

/** The scheduler's GPU prefix cache as policies read it (the BlockPool satisfies this). */
export interface GpuPrefixCache {
  readonly numBlocks: number;
  /** The block cached under `hash`, with the load still writing it (null when none), or null. */
  getCachedBlock(hash: BlockHash): { readonly id: number; readonly pendingJob: number | null } | null;
}

/** What the connector lends a policy while it builds one step's metadata. */
export interface StoreContext {
  /**
   * Offers `candidates` to the manager (prepareStore) and issues one store
   * job, into this step's metadata, for the blocks it accepts. Returns null
   * when the manager has no room now (nothing changed).
   *
   * `firstBlock`, for blocks of request `reqId`'s own table: the candidates
   * are its offloaded blocks `firstBlock`, `firstBlock + 1`, ... in order.
   * When anything was stored, the request's chain of offloaded blocks up to
   * the last candidate is refreshed in the tier (OffloadingManager.refresh),
   * so it is evicted from its tail.
   */
  store(reqId: string | null, candidates: readonly StoreCandidate[], fence: boolean, firstBlock?: number): StoreResult | null;
}

export interface StorePolicy {
  /** The policy's config name ('on-compute', 'on-evict', ...). */
  readonly name: string;

  /** Chooses this step's stores, issuing them through `context`. Called once per step, after scheduling. */
  storesFor(step: StepView, context: StoreContext): void;

  /**
   * A load was issued for the request's offloaded blocks up to (not including)
   * index `endBlock`: they come from the tier and are never stored again.
   */
  onLoadIssued(request: Request, endBlock: number): void;

  /**
   * The request was preempted: its blocks are freed. Marks reset, since it
   * may reload what it stored and will store what it recomputes.
   */
  onPreempted(request: Request): void;

  /** The request finished or was aborted; its blocks are freed once its stores are done. */
  onRequestFinished(request: Request): void;

  /** A free cached GPU block is being reused this step; its contents are intact until this step's writes. */
  onGpuBlockEvicted(blockId: number, hash: BlockHash): void;

  /** The scheduler's GPU prefix cache, attached once before the first step (write-back reads it). */
  attachGpuPrefixCache(cache: GpuPrefixCache): void;

  /** Forgets every mark and remembered block (the tier was lost). */
  reset(): void;
}
