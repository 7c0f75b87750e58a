import type { BlockHash } from '../core/block-hash.js';
import { KvtierError } from '../core/errors.js';
import type { ExternalMatch, IssuedLoad, SchedulerConnector, StepView } from '../scheduler/connector-port.js';
import type { ModelRunnerOutput, OffloadStepMetadata, TransferJobSpec } from '../protocol/step-protocol.js';
import type { Request } from '../scheduler/request.js';
import { TransferJobLedger } from './transfer-job-ledger.js';
import { offloadKeyOf, offloadKeys } from '../offload/geometry.js';
import type { OffloadingManager } from '../offload/manager.js';
import type {
  GpuPrefixCache,
  OffloadGeometry,
  StoreCandidate,
  StoreContext,
  StorePolicy,
  StoreResult,
} from '../offload/store-policies/store-policy.js';
import { ERROR_CODES } from '../core/error-codes.js';

/**
 * The scheduler side of KV offloading (docs/architecture.md, "Offloading"): turns
 * the OffloadingManager's answers into transfer jobs. Admission looks the
 * request's offloaded blocks up past its GPU prefix hit and issues one
 * asynchronous load for the hits; each step carries the loads issued since
 * the previous one, the stores the store policy chose, and the requests whose
 * stores the workers must flush because they were preempted. Job completions
 * (merged over ranks) complete loads and stores in the manager.
 *
 * Geometry: a GPU block holds blockSize tokens; an offloaded block is f
 * consecutive GPU blocks (Bo = f x blockSize tokens), keyed by the chained
 * hash of its last GPU block (offloadKeyOf in offload/geometry.ts).
 */

/** The connector was called out of protocol (a load for a match it never offered...). */
export class OffloadingConnectorError extends KvtierError {
  constructor(message: string) {
    super(ERROR_CODES.offloadConnector, message);
  }
}

export interface OffloadingConnectorOptions {
  readonly manager: OffloadingManager;
  readonly policy: StorePolicy;
  readonly geometry: OffloadGeometry;
  /** Bytes one GPU block's transfer moves over all ranks (for bytesExpected). */
  readonly bytesPerGpuBlock: number;
}

export interface OffloadingConnectorMetrics {
  /**
   * Prompt tokens served from the CPU tier that their request reached for the first time: counted
   * when the request uses them, so never the tokens of a failed load, nor the last prompt token.
   */
  readonly cpuTierHitTokens: number;
  /** Tokens served from the CPU tier that their request had reached before (read again after a preemption). */
  readonly cpuTierRereadTokens: number;
  readonly loadsIssued: number;
  readonly loadsFailed: number;
  /** GPU blocks written by loads that succeeded. */
  readonly gpuBlocksLoaded: number;
  /** Store jobs issued. */
  readonly storesIssued: number;
  /** Offloaded blocks the manager reserved for storing. */
  readonly storeBlocksAccepted: number;
  /** Offers of offloaded blocks the manager's admission declined (reuse filter); a block offered again counts again. */
  readonly storeBlocksDeclined: number;
  /** Store offers refused for lack of room (retried or skipped by the policy). */
  readonly storesRejected: number;
  /** Offloaded blocks whose store completed on every rank. */
  readonly offloadedBlocksStored: number;
  readonly storesFailed: number;
  /** Bytes of the jobs issued, over all ranks, per direction. */
  readonly bytesExpected: { readonly gpuToCpu: number; readonly cpuToGpu: number };
  /** Cached GPU blocks the prefix cache evicted. */
  readonly gpuBlocksEvicted: number;
}

/** A match offered by getNumNewMatchedTokens, waiting for its blocks to be allocated. */
interface OfferedMatch {
  readonly numComputedTokens: number;
  /** Offloaded blocks [firstBlock, endBlock) are loaded. */
  readonly firstBlock: number;
  readonly endBlock: number;
  readonly numTokens: number;
}

const NO_MATCH: ExternalMatch = Object.freeze({ numTokens: 0, loadAsync: false });
const NO_KEYS: ReadonlySet<BlockHash> = new Set();

export class OffloadingConnector implements SchedulerConnector {
  readonly manager: OffloadingManager;
  readonly policy: StorePolicy;
  readonly geometry: OffloadGeometry;
  private readonly bytesPerGpuBlock: number;
  private readonly jobs = new TransferJobLedger();
  /** Requests admitted or scheduled and not finished (the policy needs them when they are preempted). */
  private readonly live = new Map<string, Request>();
  private readonly offered = new Map<string, OfferedMatch>();
  private loadsToSend: TransferJobSpec[] = [];
  private storesToSend: TransferJobSpec[] = [];
  /** The keys of the offer being stored, refilled by every store() (see there). */
  private readonly offerKeys: BlockHash[] = [];
  /** The chain a store refreshes when offloaded blocks group several GPU blocks, refilled like offerKeys. */
  private readonly chainKeys: BlockHash[] = [];
  /** Requests that got a load since the last metadata was built. */
  private readonly loadedSinceMeta = new Set<string>();
  private readonly storeContext: StoreContext;
  private readonly counters = {
    cpuTierHitTokens: 0,
    cpuTierRereadTokens: 0,
    loadsIssued: 0,
    loadsFailed: 0,
    gpuBlocksLoaded: 0,
    storesIssued: 0,
    storeBlocksAccepted: 0,
    storeBlocksDeclined: 0,
    storesRejected: 0,
    offloadedBlocksStored: 0,
    storesFailed: 0,
    bytesGpuToCpu: 0,
    bytesCpuToGpu: 0,
    gpuBlocksEvicted: 0,
  };

  constructor(options: OffloadingConnectorOptions) {
    this.manager = options.manager;
    this.policy = options.policy;
    this.geometry = options.geometry;
    if (!Number.isFinite(options.bytesPerGpuBlock) || options.bytesPerGpuBlock < 0) {
      throw new OffloadingConnectorError(`bytesPerGpuBlock must be a number >= 0, got ${String(options.bytesPerGpuBlock)}`);
    }
    this.bytesPerGpuBlock = options.bytesPerGpuBlock;
    this.storeContext = { store: (reqId, candidates, fence, firstBlock) => this.store(reqId, candidates, fence, firstBlock) };
  }

  /** Hands the scheduler's GPU prefix cache to the store policy (write-back needs it to find whole groups). */
  attachGpuPrefixCache(cache: GpuPrefixCache): void {
    this.policy.attachGpuPrefixCache(cache);
  }

  // ---------------------------------------------------------------- admission

  getNumNewMatchedTokens(request: Request, numComputedTokens: number): ExternalMatch | null {
    const { blockSize, offloadFactor: f, offloadedBlockTokens } = this.geometry;
    if (!Number.isInteger(numComputedTokens) || numComputedTokens < 0 || numComputedTokens % blockSize !== 0) {
      throw new OffloadingConnectorError(
        `getNumNewMatchedTokens: request '${request.id}': numComputedTokens ${numComputedTokens} ` +
          `is not a whole number of ${blockSize}-token GPU blocks`,
      );
    }
    this.live.set(request.id, request);
    this.offered.delete(request.id);
    const numBlocks = Math.floor(request.numTokens / offloadedBlockTokens);
    const keys = offloadKeys(request.blockHashes, f, 0, numBlocks);
    // Keeps the whole prefix warm in the tier, hit or not.
    this.manager.touch(keys);
    if (numBlocks * offloadedBlockTokens - numComputedTokens <= 0) return NO_MATCH;

    const firstBlock = Math.floor(numComputedTokens / offloadedBlockTokens);
    const hits = this.manager.lookup(keys.slice(firstBlock));
    if (hits === null) return null;
    // The scheduler's full-hit cap can leave a prompt's last block outside its GPU hit while
    // another request's load still brings it in: never load a block twice at once.
    let endBlock = firstBlock;
    while (endBlock < firstBlock + hits && !this.jobs.isBeingLoaded(keys[endBlock])) endBlock++;
    // May start inside an offloaded block when the GPU hit ends inside one.
    const numTokens = endBlock * offloadedBlockTokens - numComputedTokens;
    if (numTokens <= 0) return NO_MATCH;
    this.offered.set(request.id, { numComputedTokens, firstBlock, endBlock, numTokens });
    return { numTokens, loadAsync: true };
  }

  updateStateAfterAlloc(request: Request, blockIds: readonly number[], numExternalTokens: number): IssuedLoad | null {
    if (numExternalTokens === 0) return null;
    const match = this.offered.get(request.id);
    if (match === undefined || match.numTokens !== numExternalTokens) {
      throw new OffloadingConnectorError(
        `updateStateAfterAlloc: request '${request.id}' got ${numExternalTokens} external tokens, ` +
          `but the last match offered it ${match?.numTokens ?? 0}`,
      );
    }
    this.offered.delete(request.id);
    const { blockSize, offloadFactor: f } = this.geometry;
    const firstBlockIndex = match.numComputedTokens / blockSize;
    const numGpuBlocks = match.endBlock * f - firstBlockIndex;
    if (blockIds.length < firstBlockIndex + numGpuBlocks) {
      throw new OffloadingConnectorError(
        `updateStateAfterAlloc: request '${request.id}' holds ${blockIds.length} GPU blocks; ` +
          `the load needs blocks [${firstBlockIndex}, ${firstBlockIndex + numGpuBlocks})`,
      );
    }

    const keys = offloadKeys(request.blockHashes, f, match.firstBlock, match.endBlock);
    const cpuBlockIds = this.manager.prepareLoad(keys);
    const gpuBlockIds = blockIds.slice(firstBlockIndex, firstBlockIndex + numGpuBlocks);
    const job = this.jobs.issue('load', request.id, keys, numGpuBlocks);
    this.loadsToSend.push({
      jobId: job.jobId,
      reqId: request.id,
      direction: 'cpuToGpu',
      gpuBlockIds,
      cpuBlockIds,
      // GPU blocks of the first offloaded block that the GPU hit already covers.
      firstSubBlock: firstBlockIndex - match.firstBlock * f,
      fence: false,
    });
    this.loadedSinceMeta.add(request.id);
    this.policy.onLoadIssued(request, match.endBlock);
    this.counters.loadsIssued++;
    this.counters.bytesCpuToGpu += numGpuBlocks * this.bytesPerGpuBlock;
    return {
      jobId: job.jobId,
      firstBlockIndex,
      gpuBlockIds,
      blockHashes: request.blockHashes.slice(firstBlockIndex, firstBlockIndex + numGpuBlocks),
    };
  }

  externalTokensServed(_request: Request, hits: number, rereads: number): void {
    this.counters.cpuTierHitTokens += hits;
    this.counters.cpuTierRereadTokens += rereads;
  }

  // ---------------------------------------------------------------- one step

  buildConnectorMeta(step: StepView): OffloadStepMetadata {
    if (step.preemptedReqIds.length > 0) {
      const scheduledIds = new Set(step.scheduled.map((view) => view.request.id));
      for (const reqId of step.preemptedReqIds) {
        // After a rank loss every known request is listed here, and some are admitted again in
        // this same step: their fresh state stays.
        if (scheduledIds.has(reqId) || this.loadedSinceMeta.has(reqId)) continue;
        this.offered.delete(reqId);
        const request = this.live.get(reqId);
        if (request === undefined) continue;
        this.policy.onPreempted(request);
        // Back at the head of the queue: it resumes first, reading what was stored for it.
        this.protectQueued(request, true);
      }
    }
    // Requests scheduled before are known already; only (re)admitted ones are new here.
    const scheduled = step.scheduled;
    for (let v = 0; v < scheduled.length; v++) {
      const view = scheduled[v];
      if (!view.fresh) continue;
      this.live.set(view.request.id, view.request);
      this.manager.release?.(view.request.id);
    }
    this.policy.storesFor(step, this.storeContext);
    const meta: OffloadStepMetadata = {
      flushReqIds: [...step.preemptedReqIds],
      stores: this.storesToSend,
      loads: this.loadsToSend,
    };
    this.storesToSend = [];
    this.loadsToSend = [];
    this.loadedSinceMeta.clear();
    return meta;
  }

  requestQueued(request: Request): void {
    this.protectQueued(request, false);
  }

  onGpuBlockEvicted(blockId: number, hash: BlockHash): void {
    this.counters.gpuBlocksEvicted++;
    this.policy.onGpuBlockEvicted(blockId, hash);
  }

  updateConnectorOutput(output: ModelRunnerOutput): void {
    for (const result of output.finishedJobs) {
      const job = this.jobs.finish(result.jobId);
      // Issued before a reset: its keys may name other blocks by now.
      if (job === undefined) continue;
      const expected = job.kind === 'load' ? 'cpuToGpu' : 'gpuToCpu';
      if (result.direction !== expected) {
        throw new OffloadingConnectorError(
          `job ${result.jobId} finished as ${result.direction} but was issued as a ${job.kind} (${expected})`,
        );
      }
      if (job.kind === 'load') {
        // A failed load failed in the transfer: the CPU copy is intact (its store completed, and
        // nothing writes a ready block), so the blocks stay in the tier and loadable. Unpin either way.
        this.manager.completeLoad(job.keys);
        if (result.ok) this.counters.gpuBlocksLoaded += job.numGpuBlocks;
        else this.counters.loadsFailed++;
      } else {
        // A store that failed on any rank leaves its blocks not ready: the manager frees them.
        this.manager.completeStore(job.keys, result.ok);
        if (result.ok) this.counters.offloadedBlocksStored += job.keys.length;
        else this.counters.storesFailed++;
      }
    }
  }

  // ---------------------------------------------------------------- lifecycle

  requestFinished(request: Request, _blockIds: readonly number[]): boolean {
    this.offered.delete(request.id);
    this.live.delete(request.id);
    this.manager.release?.(request.id);
    this.policy.onRequestFinished(request);
    // Its blocks may be freed only once every store reading them completed on every rank.
    return this.jobs.hasStoresInFlight(request.id);
  }

  hasPendingWork(): boolean {
    return this.jobs.size > 0;
  }

  reset(): void {
    this.manager.reset();
    this.jobs.clear();
    this.live.clear();
    this.offered.clear();
    this.loadsToSend = [];
    this.storesToSend = [];
    this.loadedSinceMeta.clear();
    this.policy.reset();
  }

  metrics(): OffloadingConnectorMetrics {
    const c = this.counters;
    return {
      cpuTierHitTokens: c.cpuTierHitTokens,
      cpuTierRereadTokens: c.cpuTierRereadTokens,
      loadsIssued: c.loadsIssued,
      loadsFailed: c.loadsFailed,
      gpuBlocksLoaded: c.gpuBlocksLoaded,
      storesIssued: c.storesIssued,
      storeBlocksAccepted: c.storeBlocksAccepted,
      storeBlocksDeclined: c.storeBlocksDeclined,
      storesRejected: c.storesRejected,
      offloadedBlocksStored: c.offloadedBlocksStored,
      storesFailed: c.storesFailed,
      bytesExpected: { gpuToCpu: c.bytesGpuToCpu, cpuToGpu: c.bytesCpuToGpu },
      gpuBlocksEvicted: c.gpuBlocksEvicted,
    };
  }

  // ---------------------------------------------------------------- stores

  /** Protects the tier's blocks a queued request will look up (with `front`, at the head of the queue). */
  private protectQueued(request: Request, front: boolean): void {
    // Only a manager that protects anything gets the keys: building them walks the request's whole chain.
    if (this.manager.protect === undefined || this.manager.protectsQueued === false) return;
    const numBlocks = Math.floor(request.numTokens / this.geometry.offloadedBlockTokens);
    this.manager.protect(request.id, offloadKeys(request.blockHashes, this.geometry.offloadFactor, 0, numBlocks), front);
  }

  /**
   * The StoreContext's store: one prepareStore, and one job (into this step's metadata) for what it accepted;
   * with `firstBlock`, the request's chain up to the last candidate is refreshed when anything was stored.
   */
  private store(reqId: string | null, candidates: readonly StoreCandidate[], fence: boolean, firstBlock?: number): StoreResult | null {
    const f = this.geometry.offloadFactor;
    // Index loops and one reused key array: a step in which thousands of requests complete a block
    // offers thousands of one-block stores, and per-offer garbage there is what the garbage collector pays for.
    const keys = this.offerKeys;
    for (let c = 0; c < candidates.length; c++) {
      const candidate = candidates[c];
      if (candidate.gpuBlockIds.length !== f) {
        throw new OffloadingConnectorError(
          `store of key ${candidate.key}: an offloaded block is ${f} GPU blocks, got ${candidate.gpuBlockIds.length}`,
        );
      }
      keys[c] = candidate.key;
    }
    keys.length = candidates.length;
    // The manager reads the offered keys only during the call (what it keeps, it copies).
    const out = this.manager.prepareStore(keys);
    if (out === null) {
      this.counters.storesRejected++;
      return null;
    }
    this.counters.storeBlocksAccepted += out.keysToStore.length;
    this.counters.storeBlocksDeclined += out.declinedKeys.length;
    const declinedKeys = out.declinedKeys.length === 0 ? NO_KEYS : new Set(out.declinedKeys);
    if (out.keysToStore.length === 0) return { job: null, declinedKeys };

    const gpuBlockIds = new Array<number>(out.keysToStore.length * f);
    if (out.keysToStore.length === candidates.length) {
      // Everything offered was accepted, in input order: no need to match keys to candidates.
      for (let c = 0; c < candidates.length; c++) {
        const ids = candidates[c].gpuBlockIds;
        for (let j = 0; j < f; j++) gpuBlockIds[c * f + j] = ids[j];
      }
    } else {
      const byKey = new Map(candidates.map((c) => [c.key, c]));
      out.keysToStore.forEach((key, k) => {
        const ids = (byKey.get(key) as StoreCandidate).gpuBlockIds;
        for (let j = 0; j < f; j++) gpuBlockIds[k * f + j] = ids[j];
      });
    }
    const job = this.jobs.issue('store', reqId, out.keysToStore, gpuBlockIds.length);
    const spec: TransferJobSpec = {
      jobId: job.jobId,
      reqId,
      direction: 'gpuToCpu',
      gpuBlockIds,
      // The manager's answer is a fresh array each call.
      cpuBlockIds: out.cpuBlockIds,
      firstSubBlock: 0,
      fence,
    };
    this.storesToSend.push(spec);
    this.counters.storesIssued++;
    this.counters.bytesGpuToCpu += gpuBlockIds.length * this.bytesPerGpuBlock;
    if (reqId !== null && firstBlock !== undefined) this.refreshChain(reqId, firstBlock, firstBlock + candidates.length);
    return { job: spec, declinedKeys };
  }

  /**
   * Refreshes request `reqId`'s offloaded blocks [0, end) in the tier, first block first, the store having
   * offered [firstOffered, end), as vLLM's connector touches a request's blocks on every store: the chain's
   * head stays newer than its tail, so eviction takes tails first, and prefix-aware orders learn the parents
   * of blocks computed after admission.
   */
  private refreshChain(reqId: string, firstOffered: number, end: number): void {
    const request = this.live.get(reqId);
    if (request === undefined) {
      throw new OffloadingConnectorError(`store for request '${reqId}': the connector does not know the request`);
    }
    const f = this.geometry.offloadFactor;
    if (!Number.isInteger(firstOffered) || firstOffered < 0 || end * f > request.blockHashes.length) {
      throw new OffloadingConnectorError(
        `store for request '${reqId}': offloaded blocks [${firstOffered}, ${end}) are not within its ` +
          `${Math.floor(request.blockHashes.length / f)} offloaded blocks`,
      );
    }
    // With one GPU block per offloaded block the request's own hashes are its chain: nothing to build.
    if (f === 1) {
      this.manager.refresh(request.blockHashes, firstOffered, end);
      return;
    }
    const chain = this.chainKeys;
    for (let i = 0; i < end; i++) chain[i] = offloadKeyOf(request.blockHashes, f, i);
    chain.length = end;
    this.manager.refresh(chain, firstOffered, end);
  }
}
