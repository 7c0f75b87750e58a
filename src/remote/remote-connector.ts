import { performance } from 'node:perf_hooks';
import type { BlockHash } from '../core/block-hash.js';
import type { OffloadingConnector } from '../connector/scheduler-connector.js';
import type { ExternalMatch, FailedExternalRead, IssuedLoad, SchedulerConnector, StepView } from '../scheduler/connector-port.js';
import type { ModelRunnerOutput, OffloadStepMetadata } from '../protocol/step-protocol.js';
import type { Request } from '../scheduler/request.js';
import type { RemoteBlockRef, RemoteFetchSpec, RemoteJobResult, RemoteTestSwitches, RemoteWriteSpec } from '../protocol/remote-jobs.js';
import { chainSeed, extendChain, manifestKey, type RemoteNamespace } from './remote-keys.js';
import { RemoteTierStats } from './remote-stats.js';
import type { RemoteStore } from './remote-store.js';
import type { CpuTierObserver, CpuTierTrackingManager } from './tracking-manager.js';
import type { RemoteFaults } from './remote-faults.js';
import { encodeManifest } from './value-format.js';
import { RetryWaits, writeWithRetries, type RemoteRetrySettings } from './write-retry.js';

/** When remote writes happen: as soon as a CPU-tier store completed, or when the CPU tier evicts the block. */
export type RemotePolicy = 'write-through' | 'write-back';

export interface RemoteTierConnectorOptions {
  readonly inner: OffloadingConnector;
  /** The CPU tier's manager as the inner connector sees it (wrapped, so stores and evictions are observed). */
  readonly manager: CpuTierTrackingManager;
  readonly store: RemoteStore;
  readonly namespace: RemoteNamespace;
  readonly policy: RemotePolicy;
  /** Write jobs (all ranks) that may be in flight; further writes are dropped and counted. */
  readonly maxWriteJobsInFlight: number;
  /** How failed manifest writes are tried again (the ranks retry their shards with the same settings). */
  readonly retry?: RemoteRetrySettings;
  readonly testSwitches?: RemoteTestSwitches;
  /** Injected outages (`remote-down` in the fault plan): lookups miss and manifests fail while the remote is down. */
  readonly faults?: RemoteFaults | null;
  /** Waiting requests whose remote lookups may be under way at once (the next ones to be admitted). */
  readonly lookaheadRequests?: number;
}

/** A request's remote chain and where its remote lookup stands. */
interface RequestRemoteState {
  readonly seed: Buffer;
  readonly chain: Buffer[];
  phase: 'looking' | 'found' | 'fetching' | 'done';
  /** First offloaded block looked up, and how many from there the remote holds. */
  from: number;
  found: number;
  /** Admission attempts that found no room in the CPU tier for the fetch. */
  roomRetries: number;
  /** Lookups and fetches started for the request (bounded by MAX_REMOTE_ATTEMPTS). */
  attempts: number;
  /** The request's preemptions when its last lookup started. */
  preemptions: number;
}

/** Admission attempts a request waits for CPU-tier room for its fetch before it gives the hit up. */
const MAX_ROOM_RETRIES = 64;

/**
 * Default lookahead: waiting requests looked up before they are admitted. A
 * lookup answers for the moment it is asked and a fetch fills CPU-tier blocks
 * that the request reads only when admitted, so requests deep in the queue are
 * asked later, when their answer includes blocks written meanwhile (by this
 * engine or another) and their fetched blocks are not evicted before use.
 */
export const DEFAULT_LOOKAHEAD_REQUESTS = 16;

/**
 * Lookups plus fetches one request may start. A request asks again when the
 * blocks it was answered are no longer in the GPU or CPU tier by the time it
 * is admitted (evicted while it waited for GPU room, or it was preempted), or
 * when a fetch covered only part of them; the bound stops a request whose
 * blocks keep being evicted from fetching forever.
 */
const MAX_REMOTE_ATTEMPTS = 8;

interface FetchJob {
  readonly reqId: string;
  readonly keys: readonly BlockHash[];
  readonly tokens: number;
}

interface WriteJob {
  readonly blocks: readonly RemoteBlockRef[];
  readonly digests: readonly Buffer[];
}

const MAX_DIGESTS_MIN = 16_384;

/**
 * The scheduler side of the remote tier (docs/architecture.md, "Remote
 * tier"), wrapped around the CPU tier's connector. Admission first asks the
 * CPU tier; for the blocks past its hits it checks the remote's manifests
 * asynchronously (pipelined EXISTS over the request's remaining chain): the
 * request waits in its own state, answering "not now", and other requests
 * keep running. Blocks the remote holds are reserved in the CPU tier (being
 * stored) and fetched there by every rank; once the fetch finished on every
 * rank they are ready, and the next admission loads them through the CPU
 * tier's load path. A fetch that failed on any rank frees its blocks: the
 * request recomputes them. Writes follow CPU-tier stores (write-through) or
 * evictions (write-back); a block's manifest is written once every rank
 * wrote its shard, so a block is present remotely only when all shards are.
 */
export class RemoteTierConnector implements SchedulerConnector, CpuTierObserver {
  readonly stats = new RemoteTierStats();
  private readonly inner: OffloadingConnector;
  private readonly manager: CpuTierTrackingManager;
  private readonly store: RemoteStore;
  private readonly ns: RemoteNamespace;
  private readonly policy: RemotePolicy;
  private readonly switches: RemoteTestSwitches;
  private readonly maxWriteJobs: number;
  private readonly requests = new Map<string, RequestRemoteState>();
  /** CPU-tier blocks (local keys) filled from the remote and not evicted since. */
  private readonly fetched = new Set<BlockHash>();
  /** Per request: GPU prefix tokens at the admission attempt that last returned a match. */
  private readonly matchedFrom = new Map<string, number>();
  /** Requests whose lookup started and that were not scheduled since (the lookahead window). */
  private readonly preparing = new Set<string>();
  private readonly maxPreparing: number;
  /** Remote digest of local block keys seen in requests (bounded, oldest dropped first). */
  private readonly digests = new Map<BlockHash, Buffer>();
  private readonly maxDigests: number;
  private readonly capacityBlocks: number;
  /** Local keys whose blocks came from the remote, or were written there: not written again. */
  private readonly remoteHeld = new Set<BlockHash>();
  private readonly fetchJobs = new Map<number, FetchJob>();
  private readonly writeJobs = new Map<number, WriteJob>();
  /** Fetches that failed since the scheduler last asked, by request. */
  private failedReads: FailedExternalRead[] = [];
  private fetchesToSend: RemoteFetchSpec[] = [];
  private writesToSend: RemoteWriteSpec[] = [];
  private manifestsInFlight = 0;
  private readonly retry: RemoteRetrySettings;
  /** Backoff waits of failed manifest writes; shutdown cuts them short. */
  private readonly retryWaits = new RetryWaits();
  private closed = false;
  private readonly faults: RemoteFaults | null;
  /** The step being built (for injected outages). */
  private step = 0;
  private nextJobId = 1;
  /** Bumped by reset: answers of lookups started before it are dropped. */
  private epoch = 0;

  constructor(options: RemoteTierConnectorOptions) {
    this.inner = options.inner;
    this.manager = options.manager;
    this.store = options.store;
    this.ns = options.namespace;
    this.policy = options.policy;
    this.switches = options.testSwitches ?? {};
    this.maxWriteJobs = options.maxWriteJobsInFlight;
    this.retry = options.retry ?? { writeAttempts: 1, backoffMs: 0 };
    this.faults = options.faults ?? null;
    this.maxPreparing = this.switches.lookupWholeQueue ? Infinity : Math.max(1, options.lookaheadRequests ?? DEFAULT_LOOKAHEAD_REQUESTS);
    this.capacityBlocks = options.inner.manager.stats().capacityBlocks;
    this.maxDigests = Math.max(MAX_DIGESTS_MIN, 4 * this.capacityBlocks);
    this.manager.observe(this);
  }

  // ---------------------------------------------------------------- admission

  getNumNewMatchedTokens(request: Request, numComputedTokens: number): ExternalMatch | null {
    const match = this.admissionMatch(request, numComputedTokens);
    if (match !== null && match.numTokens > 0) this.matchedFrom.set(request.id, numComputedTokens);
    return match;
  }

  private admissionMatch(request: Request, numComputedTokens: number): ExternalMatch | null {
    let state = this.requests.get(request.id);
    if (state?.phase === 'looking' || state?.phase === 'fetching') return null;
    const match = this.inner.getNumNewMatchedTokens(request, numComputedTokens);
    if (match === null) return null;

    const per = this.ns.blockTokens;
    const numBlocks = Math.floor(request.numTokens / per);
    const from = match.numTokens > 0 ? (numComputedTokens + match.numTokens) / per : Math.floor(numComputedTokens / per);
    if (state?.phase === 'done') {
      // Answered before: ask again only where the GPU and CPU tiers now stop short of what the remote was known to hold.
      if (state.attempts >= MAX_REMOTE_ATTEMPTS || from >= numBlocks || !this.store.connected) return match;
      if (from < state.from || request.numPreemptions !== state.preemptions) {
        this.lookup(request, state, from, numBlocks);
        return null;
      }
      if (from >= state.from + state.found) return match;
      state.phase = 'found';
    }
    if (state === undefined) {
      if (from >= numBlocks || !this.store.connected) return match;
      // Far back in the queue: asked when it nears admission, so the answer includes blocks written meanwhile.
      if (this.preparing.size >= this.maxPreparing) return null;
      state = this.track(request, 'looking');
      this.lookup(request, state, from, numBlocks);
      return null;
    }
    // 'found': the remote holds blocks [state.from, end); the CPU tier may have gained some since.
    state.phase = 'done';
    // At most half the tier at once, so a fetch always fits once in-flight work drained.
    const end = Math.min(state.from + state.found, from + Math.max(1, Math.floor(this.capacityBlocks / 2)));
    if (from < state.from || from >= end) return match;
    const keys: BlockHash[] = [];
    const refs: RemoteBlockRef[] = [];
    const f = this.inner.geometry.offloadFactor;
    for (let i = from; i < end; i++) keys.push(request.blockHashes[i * f + f - 1]);
    const out = this.manager.prepareStore(keys);
    if (out === null && state.roomRetries < MAX_ROOM_RETRIES) {
      // No room now (blocks being stored or loaded): the request waits a step and asks again.
      state.roomRetries++;
      state.phase = 'found';
      return null;
    }
    if (out === null || out.keysToStore.length === 0) {
      // Given up (no room) or nothing left to fetch: not asked again for these blocks.
      if (out === null) state.found = 0;
      return match;
    }
    state.attempts++;
    const index = new Map(keys.map((k, i) => [k, from + i]));
    for (let i = 0; i < out.keysToStore.length; i++) {
      const block = index.get(out.keysToStore[i]) as number;
      refs.push({ digestHex: state.chain[block].toString('hex'), cpuBlockId: out.cpuBlockIds[i] });
      this.remoteHeld.add(out.keysToStore[i]);
    }
    const jobId = this.nextJobId++;
    const tokens = out.keysToStore.length * per - Math.max(0, numComputedTokens - from * per);
    this.fetchJobs.set(jobId, { reqId: request.id, keys: out.keysToStore, tokens });
    this.fetchesToSend.push({ jobId, blocks: refs });
    this.stats.fetchIssued(refs.length);
    state.phase = 'fetching';
    return null;
  }

  updateStateAfterAlloc(request: Request, blockIds: readonly number[], numExternalTokens: number): IssuedLoad | null {
    const local = this.matchedFrom.get(request.id);
    if (local !== undefined && request.numPreemptions === 0) this.countServed(request, local, local + numExternalTokens);
    return this.inner.updateStateAfterAlloc(request, blockIds, numExternalTokens);
  }

  externalTokensServed(request: Request, hits: number, rereads: number): void {
    this.inner.externalTokensServed(request, hits, rereads);
  }

  // ---------------------------------------------------------------- one step

  buildConnectorMeta(step: StepView): OffloadStepMetadata {
    this.step = step.step + 1;
    // Stores this step may choose need the digests of the blocks computed so far.
    for (const view of step.scheduled) {
      this.extend(view.request, view.request.numTokens);
      this.preparing.delete(view.request.id);
    }
    const meta = this.inner.buildConnectorMeta(step);
    const remote = { fetches: this.fetchesToSend, writes: this.writesToSend };
    this.fetchesToSend = [];
    this.writesToSend = [];
    return remote.fetches.length === 0 && remote.writes.length === 0 ? meta : { ...meta, remote };
  }

  updateConnectorOutput(output: ModelRunnerOutput): void {
    for (const health of output.remoteHealth ?? []) this.stats.noteRankHealth(health);
    for (const result of output.remoteJobs ?? []) {
      if (result.kind === 'fetch') this.fetchFinished(result);
      else this.writeFinished(result);
    }
    this.inner.updateConnectorOutput(output);
  }

  takeFailedReads(): FailedExternalRead[] {
    const reads = this.failedReads;
    this.failedReads = [];
    return reads;
  }

  onGpuBlockEvicted(blockId: number, hash: BlockHash): void {
    this.inner.onGpuBlockEvicted(blockId, hash);
  }

  // ---------------------------------------------------------------- CPU tier events

  blocksStored(keys: readonly BlockHash[], cpuBlockIds: readonly number[]): void {
    if (this.policy !== 'write-through') return;
    this.queueWrites(keys, cpuBlockIds);
  }

  blocksEvicted(keys: readonly BlockHash[], cpuBlockIds: readonly number[]): void {
    if (this.policy === 'write-back') this.queueWrites(keys, cpuBlockIds);
    for (const key of keys) {
      this.remoteHeld.delete(key);
      this.fetched.delete(key);
    }
  }

  // ---------------------------------------------------------------- lifecycle

  requestFinished(request: Request, blockIds: readonly number[]): boolean {
    this.requests.delete(request.id);
    this.preparing.delete(request.id);
    this.matchedFrom.delete(request.id);
    return this.inner.requestFinished(request, blockIds);
  }

  hasPendingWork(): boolean {
    return this.inner.hasPendingWork() || this.fetchJobs.size > 0 || this.writeJobs.size > 0 || this.manifestsInFlight > 0;
  }

  reset(): void {
    this.epoch++;
    this.inner.reset();
    this.requests.clear();
    this.preparing.clear();
    this.matchedFrom.clear();
    this.fetched.clear();
    this.remoteHeld.clear();
    this.fetchJobs.clear();
    this.writeJobs.clear();
    this.fetchesToSend = [];
    this.writesToSend = [];
    this.failedReads = [];
  }

  /** Waits for manifest writes in flight (none is retried from now on), then closes the connection. */
  async close(): Promise<void> {
    this.retryWaits.cancelAll();
    const deadline = performance.now() + 2 * this.store.options.timeoutMs;
    while (this.manifestsInFlight > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    if (!this.closed) this.stats.noteConnection(this.store.stats());
    this.closed = true;
    await this.store.close();
  }

  snapshot(): ReturnType<RemoteTierStats['snapshot']> {
    // After close, the connection as it was when the engine shut down.
    if (!this.closed) this.stats.noteConnection(this.store.stats());
    return this.stats.snapshot();
  }

  // ---------------------------------------------------------------- internals

  private track(request: Request, phase: RequestRemoteState['phase']): RequestRemoteState {
    const state: RequestRemoteState = {
      seed: chainSeed(this.ns, request.cacheSalt),
      chain: [],
      phase,
      from: 0,
      found: 0,
      roomRetries: 0,
      attempts: 0,
      preemptions: request.numPreemptions,
    };
    this.requests.set(request.id, state);
    return state;
  }

  /** Extends the request's chain over its first `numTokens` tokens and remembers each block's digest. */
  private extend(request: Request, numTokens: number): RequestRemoteState {
    // A request first seen here was admitted without a remote lookup: it gets none later either.
    const state = this.requests.get(request.id) ?? this.track(request, 'done');
    const before = state.chain.length;
    extendChain(this.ns, state.seed, state.chain, (p) => request.tokenAt(p), numTokens);
    const f = this.inner.geometry.offloadFactor;
    for (let i = before; i < state.chain.length; i++) {
      const key = request.blockHashes[i * f + f - 1];
      this.digests.delete(key);
      this.digests.set(key, state.chain[i]);
    }
    while (this.digests.size > this.maxDigests) this.digests.delete(this.digests.keys().next().value as BlockHash);
    return state;
  }

  private lookup(request: Request, state: RequestRemoteState, from: number, to: number): void {
    this.extend(request, to * this.ns.blockTokens);
    state.phase = 'looking';
    state.from = from;
    state.found = 0;
    state.roomRetries = 0;
    state.attempts++;
    state.preemptions = request.numPreemptions;
    this.preparing.add(request.id);
    const keys: string[] = [];
    for (let i = from; i < to; i++) keys.push(manifestKey(this.ns, state.chain[i].toString('hex')));
    const epoch = this.epoch;
    const t0 = performance.now();
    if (this.faults?.downAt(this.step)) {
      this.stats.lookupFailed(0, false);
      state.phase = 'done';
      return;
    }
    this.store.exists(keys).then(
      (present) => {
        let n = 0;
        while (n < present.length && present[n]) n++;
        this.stats.lookupAnswered(performance.now() - t0, keys.length, n);
        if (epoch === this.epoch && this.requests.get(request.id) === state) {
          state.found = n;
          state.phase = n > 0 ? 'found' : 'done';
        }
      },
      (error: unknown) => {
        // A lookup that fails or times out is a miss.
        this.stats.lookupFailed(performance.now() - t0, (error as { kind?: string }).kind === 'timeout');
        if (epoch === this.epoch && this.requests.get(request.id) === state) state.phase = 'done';
      },
    );
  }

  /** Counts the tokens in [fromToken, toToken) that lie in blocks the remote filled. */
  private countServed(request: Request, fromToken: number, toToken: number): void {
    const per = this.ns.blockTokens;
    const f = this.inner.geometry.offloadFactor;
    let tokens = 0;
    for (let i = Math.floor(fromToken / per); i * per < toToken; i++) {
      if (!this.fetched.has(request.blockHashes[i * f + f - 1])) continue;
      tokens += Math.min(toToken, (i + 1) * per) - Math.max(fromToken, i * per);
    }
    if (tokens === 0) return;
    this.stats.served(tokens);
    request.remoteHitTokens += tokens;
  }

  private queueWrites(keys: readonly BlockHash[], cpuBlockIds: readonly number[]): void {
    const blocks: RemoteBlockRef[] = [];
    const digests: Buffer[] = [];
    for (let i = 0; i < keys.length; i++) {
      const digest = this.digests.get(keys[i]);
      if (digest === undefined || cpuBlockIds[i] < 0 || this.remoteHeld.has(keys[i])) continue;
      blocks.push({ digestHex: digest.toString('hex'), cpuBlockId: cpuBlockIds[i] });
      digests.push(digest);
      this.remoteHeld.add(keys[i]);
    }
    if (blocks.length === 0) return;
    if (this.writeJobs.size >= this.maxWriteJobs) {
      this.stats.writesDropped(blocks.length);
      for (const key of keys) this.remoteHeld.delete(key);
      return;
    }
    const jobId = this.nextJobId++;
    this.writeJobs.set(jobId, { blocks, digests });
    this.writesToSend.push({ jobId, blocks });
    this.stats.writeIssued(blocks.length);
  }

  private fetchFinished(result: RemoteJobResult): void {
    const job = this.fetchJobs.get(result.jobId);
    if (job === undefined) return;
    this.fetchJobs.delete(result.jobId);
    // Ready on success; freed (and recomputed by whoever needs it) on failure.
    this.manager.completeStore(job.keys, result.ok);
    if (result.ok) {
      this.stats.fetchSucceeded(job.keys.length, job.tokens, result.bytes);
      for (const key of job.keys) this.fetched.add(key);
    }
    else {
      this.stats.fetchFailed(job.keys.length, result.failure);
      for (const key of job.keys) this.remoteHeld.delete(key);
      this.failedReads.push({ reqId: job.reqId, blocks: job.keys.length });
    }
    const state = this.requests.get(job.reqId);
    if (state !== undefined && state.phase === 'fetching') {
      state.phase = 'done';
      // What the remote failed to give is not asked for again.
      if (!result.ok) state.found = 0;
    }
  }

  private writeFinished(result: RemoteJobResult): void {
    const job = this.writeJobs.get(result.jobId);
    if (job === undefined) return;
    this.writeJobs.delete(result.jobId);
    if ((result.retries ?? 0) > 0) this.stats.writesRetried(job.blocks.length);
    if (!result.ok) {
      this.stats.writeFailed(job.blocks.length, result.failure);
      if (result.gaveUp) this.stats.writesGivenUp(job.blocks.length);
      return;
    }
    this.stats.writeSucceeded(job.blocks.length, result.bytes);
    if (this.switches.skipManifests) return;
    if (this.faults?.downAt(this.step)) {
      this.stats.manifestsFailed(job.digests.length);
      return;
    }
    // Every rank wrote its shard: announce the blocks.
    this.manifestsInFlight++;
    void this.writeManifests(job.digests).finally(() => {
      this.manifestsInFlight--;
    });
  }

  /** Writes the blocks' manifests; those that fail transiently are tried again after a backoff, up to the configured tries. */
  private async writeManifests(digests: readonly Buffer[]): Promise<void> {
    const write = (d: Buffer) => this.store.set(manifestKey(this.ns, d.toString('hex')), encodeManifest(this.ns, d));
    const outcome = await writeWithRetries(digests, write, this.retry, this.retryWaits);
    this.stats.manifestsWritten(outcome.written);
    this.stats.manifestsRetried(outcome.retried);
    this.stats.manifestsFailed(outcome.failed);
  }
}
