import { EngineError, RequestError } from '../core/errors.js';
import type { FinishReason } from './request.js';
import type { SchedulerConfig } from './config.js';
import type { ExternalMatch, FailedExternalRead, IssuedLoad, SchedulerConnector, ScheduledRequestView } from './connector-port.js';
import { checkExternalMatch, checkIssuedLoad } from './connector-checks.js';
import { FinishedHolds } from './finished-holds.js';
import { KVCacheManager } from './kv-cache-manager.js';
import { findInvalidBlockUses } from './load-failures.js';
import { LoadWaits } from './load-waits.js';
import { NO_TOKEN, type ModelRunnerOutput, type ScheduledRequest, type SchedulerOutput } from '../protocol/step-protocol.js';
import { finishReasonOf, type FinishedStatus, type Request, type RequestLimits } from './request.js';
import { RunningList } from './running-list.js';
import type { SchedulerObserver } from './scheduler-observer.js';
import { SchedulerCounters, type SchedulerStats } from './scheduler-stats.js';
import { TokenLedger } from './token-ledger.js';
import { SampledTokenUpdate, singleToken, StepRequest, StepRequestView } from './step-records.js';
import { StepWorkTally, type StepClock } from '../timing/step-cost.js';

/**
 * Decides each engine step (docs/architecture.md, "One engine step"), following vLLM v1:
 * running requests first, in arrival order, preempting the latest arrival
 * when blocks run out; then waiting requests in queue order, with GPU prefix
 * hits, connector (CPU tier) hits and asynchronous loads; then, from the
 * workers' output, failed-load recovery, load completions, sampled tokens and
 * finished requests.
 */

export interface SchedulerTestOnlyOptions {
  /** Ignore invalid blocks: no request is truncated and no token is dropped. */
  readonly skipInvalidBlockRecovery?: boolean;
  /** Leave invalid blocks in the prefix cache. */
  readonly keepInvalidBlocksCached?: boolean;
  /** Append tokens sampled from invalid KV instead of dropping them. */
  readonly keepTokensSampledFromInvalidKv?: boolean;
}

export interface SchedulerOptions {
  readonly connector?: SchedulerConnector | null;
  /** Engine clock in ms; default performance.now(). */
  readonly now?: () => number;
  /** Switches recovery behaviours off, to show in tests that each one matters. Never set in production. */
  readonly testOnly?: SchedulerTestOnlyOptions;
  /** Told about finished and preempted requests and timed lookups (metrics); none by default. */
  readonly observer?: SchedulerObserver | null;
  /** Prices each step's compute (SchedulerOutput.computeNs); none: the devices' own per-token cost. */
  readonly stepClock?: StepClock | null;
}

/** What one step did to one request, for the caller. */
export interface RequestUpdate {
  readonly reqId: string;
  readonly newTokenIds: readonly number[];
  /** The one new token as a number, where there is exactly one (RequestTokens.token). */
  readonly token?: number;
  /** The request's owner (Request.owner). */
  readonly owner: unknown;
  readonly finishReason?: FinishReason;
  readonly errorMessage?: string;
}

/** The step being built: what the workers get, and the scheduler's side of it. */
interface StepDraft {
  readonly requests: ScheduledRequest[];
  /** The Request behind each entry of `requests`. */
  readonly scheduled: Request[];
  /** The connector's view of each entry (built as entries are committed), or null without a connector. */
  readonly views: ScheduledRequestView[] | null;
  /** Entries committed so far: the arrays are sized in advance and cut to this length at the end. */
  count: number;
  totalTokens: number;
}

/** One request's part of a step, before it is committed. */
interface StepEntry {
  readonly request: Request;
  readonly numTokens: number;
  readonly newBlockIds: readonly number[];
}

const NO_IDS: readonly number[] = Object.freeze([]);

export class Scheduler {
  readonly config: SchedulerConfig;
  readonly kvCacheManager: KVCacheManager;
  private readonly connector: SchedulerConnector | null;
  private readonly now: () => number;
  private readonly testOnly: SchedulerTestOnlyOptions;
  private readonly observer: SchedulerObserver | null;
  private readonly stepClock: StepClock | null;
  private readonly stepWork = new StepWorkTally();

  /** Unfinished requests by id. */
  private readonly requests = new Map<string, Request>();
  private readonly running: RunningList;
  /** Waiting, preempted and waiting-for-KV requests in queue order. */
  private waiting: Request[] = [];
  private readonly addOrder = new Map<string, number>();
  private nextAddOrder = 0;
  /**
   * Requests whose block table the workers hold (the next step sends only appended blocks), in the
   * order they became known; each also points back here (`knownToWorkersOf`), which is what a step reads.
   */
  private readonly knownToWorkers = new Set<Request>();
  /** The requests of the last step scheduled, in batch order (saves lookups when its output arrives). */
  private lastStep: { readonly step: number; readonly scheduled: readonly Request[] } | null = null;
  /**
   * The arrays behind a step, refilled by every step so that a decode step allocates none per request
   * (docs/architecture.md, "One engine step"): the step's records (`SchedulerOutput.requests`, valid until
   * the next schedule()), the requests behind them (read until the next step is scheduled, through
   * `lastStep`, which names its step), the connector's views (read only while the connector builds the
   * step's metadata), and the updates updateFromOutput() returns (valid until its next call).
   */
  private readonly stepRequests: ScheduledRequest[] = [];
  private readonly stepScheduled: Request[] = [];
  private readonly stepViews: StepRequestView[] = [];
  private readonly stepUpdates: RequestUpdate[] = [];
  private readonly loadWaits = new LoadWaits();
  /** In-flight asynchronous loads issued for a request: request id -> job id, and back. */
  private readonly ownLoadByRequest = new Map<string, number>();
  private readonly ownLoadRequestByJob = new Map<number, string>();
  private readonly holds = new FinishedHolds();
  private finishedSinceLastStep: string[] = [];
  /** Requests whose tables the workers must drop after a rank loss (sent as preempted). */
  private droppedByReset: string[] = [];
  private stepCount = 0;
  private readonly counters = new SchedulerCounters();
  /** Hits, rereads and computed tokens, counted once per position when used. */
  private readonly ledger: TokenLedger;
  /**
   * GPU blocks reported invalid whose load has not completed on every rank
   * yet: each rank reports a failed block, in its own step, so a block is
   * counted once, at its first report.
   */
  private readonly invalidBlocksCounted = new Set<number>();
  /** Live requests counted as recovered: a request truncated by several reports is one recovered request. */
  private readonly recoveredRequests = new Set<string>();

  constructor(config: SchedulerConfig, options: SchedulerOptions = {}) {
    this.config = config;
    this.connector = options.connector ?? null;
    this.now = options.now ?? (() => performance.now());
    this.testOnly = options.testOnly ?? {};
    this.observer = options.observer ?? null;
    this.stepClock = options.stepClock ?? null;
    const connector = this.connector;
    const served = connector?.externalTokensServed;
    this.ledger = new TokenLedger(served === undefined ? null : (request, hits, rereads) => served.call(connector, request, hits, rereads));
    this.running = new RunningList((r) => this.addOrder.get(r.id) as number);
    this.kvCacheManager = new KVCacheManager({
      blockSize: config.blockSize,
      numGpuBlocks: config.numGpuBlocks,
      enablePrefixCaching: config.enablePrefixCaching,
    });
    const onEvicted = this.connector?.onGpuBlockEvicted;
    if (onEvicted !== undefined) {
      this.kvCacheManager.pool.setEvictionObserver((blockId, hash) => onEvicted.call(this.connector, blockId, hash));
    }
  }

  /** The limits createRequest must check a request against for this scheduler. */
  get requestLimits(): RequestLimits {
    return { vocabSize: this.config.vocabSize, maxModelLen: this.config.maxModelLen, blockSize: this.config.blockSize };
  }

  addRequest(request: Request): void {
    if (this.requests.has(request.id) || this.holds.has(request.id)) {
      throw new RequestError(`request id '${request.id}' is already in use`);
    }
    if (request.blockSize !== this.config.blockSize) {
      throw new RequestError(
        `request '${request.id}': hashed with blockSize ${request.blockSize}, the scheduler uses ${this.config.blockSize}`,
      );
    }
    if (request.numPromptTokens + request.maxTokens > this.config.maxModelLen) {
      throw new RequestError(
        `request '${request.id}': promptTokens.length ${request.numPromptTokens} + maxTokens ${request.maxTokens} ` +
          `exceeds maxModelLen ${this.config.maxModelLen}`,
      );
    }
    if (request.status !== 'waiting' || request.numComputedTokens !== 0 || request.numOutputTokens !== 0) {
      throw new RequestError(`request '${request.id}': only a new request can be added (status ${request.status})`);
    }
    this.requests.set(request.id, request);
    this.addOrder.set(request.id, this.nextAddOrder++);
    this.waiting.push(request);
    this.connector?.requestQueued?.(request);
    this.counters.requestsAdded++;
  }

  /** The unfinished request with this id, if any. */
  getRequest(id: string): Request | undefined {
    return this.requests.get(id);
  }

  /**
   * Aborts a request in any state. A request waiting for its own load is
   * reported finished now, but its blocks stay allocated until the load
   * finished. Returns false for unknown or already finished requests.
   */
  abortRequest(id: string): boolean {
    const request = this.requests.get(id);
    if (request === undefined) return false;
    this.detach(request);
    this.finish(request, 'finishedAborted');
    return true;
  }

  hasUnfinishedRequests(): boolean {
    return this.requests.size > 0;
  }

  /** true while the engine must keep stepping: unfinished requests, held blocks, or connector work. */
  hasPendingWork(): boolean {
    return this.requests.size > 0 || this.holds.size > 0 || (this.connector?.hasPendingWork() ?? false);
  }

  // ---------------------------------------------------------------- schedule

  schedule(): SchedulerOutput {
    const step = this.stepCount++;
    const draft: StepDraft = {
      requests: this.stepRequests,
      scheduled: this.stepScheduled,
      views: this.connector === null ? null : this.stepViews,
      count: 0,
      totalTokens: 0,
    };
    this.stepWork.reset();
    const now = this.now();
    const preemptedReqIds: string[] = this.droppedByReset;
    this.droppedByReset = [];
    let budget = this.config.maxNumBatchedTokens;

    // Running requests, oldest arrival first.
    let preempted = false;
    let i = 0;
    while (i < this.running.length && budget > 0) {
      const request = this.running.at(i);
      const numNew = Math.min(request.numTokens - request.numComputedTokens, budget);
      if (numNew <= 0) {
        i++;
        continue;
      }
      let newBlockIds: readonly number[] | null = null;
      for (;;) {
        newBlockIds = this.kvCacheManager.allocateSlots(request, numNew);
        if (newBlockIds !== null) break;
        // The tail is the latest arrival; it was not scheduled yet this step (or is this request).
        const victim = this.running.popLatest() as Request;
        this.preempt(victim);
        preemptedReqIds.push(victim.id);
        preempted = true;
        if (victim === request) break;
      }
      if (newBlockIds === null) break;
      this.commit(draft, request, numNew, newBlockIds, now);
      budget -= numNew;
      i++;
    }

    // Waiting requests; none is admitted in a step that preempted.
    if (!preempted) this.scheduleWaiting(draft, budget, now);

    return this.buildOutput(step, draft, preemptedReqIds);
  }

  private scheduleWaiting(draft: StepDraft, budget: number, now: number): void {
    let numSeqs = this.running.length;
    for (const request of this.waiting) if (request.status === 'waitingForCpuTierLoad') numSeqs++;
    let admitNew = true;
    const stillWaiting: Request[] = [];
    for (const request of this.waiting) {
      if (budget <= 0) {
        stillWaiting.push(request);
        continue;
      }
      if (request.status === 'waitingForCpuTierLoad') {
        // Admitted already (holds its blocks and a sequence slot): runs once every load it waits for landed.
        const entry = this.loadWaits.isWaiting(request.id) ? null : this.scheduleAfterLoad(request, budget);
        if (entry === null) {
          stillWaiting.push(request);
        } else {
          this.commit(draft, entry.request, entry.numTokens, entry.newBlockIds, now);
          budget -= entry.numTokens;
        }
        continue;
      }
      if (!admitNew || numSeqs >= this.config.maxNumSeqs) {
        stillWaiting.push(request);
        continue;
      }
      const outcome = this.admit(request, budget);
      if (outcome.kind === 'later') {
        stillWaiting.push(request);
      } else if (outcome.kind === 'blocked') {
        // FCFS: nothing behind it is admitted this step (admitted requests may still run).
        admitNew = false;
        stillWaiting.push(request);
      } else if (outcome.kind === 'waitsForKv') {
        numSeqs++;
        stillWaiting.push(request);
      } else {
        numSeqs++;
        this.commit(draft, outcome.entry.request, outcome.entry.numTokens, outcome.entry.newBlockIds, now);
        budget -= outcome.entry.numTokens;
      }
    }
    this.waiting = stillWaiting;
  }

  /**
   * Admits a new or preempted request: GPU prefix hits, connector hits, block
   * allocation and, for an asynchronous load or a hit on blocks still being
   * loaded, the wait for KV.
   */
  private admit(
    request: Request,
    budget: number,
  ): { kind: 'later' } | { kind: 'blocked' } | { kind: 'waitsForKv' } | { kind: 'scheduled'; entry: StepEntry } {
    const observer = this.observer;
    const t0 = observer !== null ? performance.now() : 0;
    const hit = this.kvCacheManager.getComputedBlocks(request);
    const numLocal = hit.numComputedTokens;
    let match: ExternalMatch = { numTokens: 0, loadAsync: false };
    if (observer !== null) observer.lookupTimed('gpu_prefix', performance.now() - t0);
    if (this.connector !== null) {
      const t1 = observer !== null ? performance.now() : 0;
      const answer = this.connector.getNumNewMatchedTokens(request, numLocal);
      if (observer !== null) observer.lookupTimed('cpu', performance.now() - t1);
      if (answer === null) return { kind: 'later' };
      checkExternalMatch(request, numLocal, answer);
      match = answer;
    }
    const numExternal = match.numTokens;
    const numKnown = numLocal + numExternal;
    const waitsForKv = hit.pendingJobs.size > 0 || (numExternal > 0 && match.loadAsync);

    let numNew = 0;
    let numAllocTokens = 0;
    let numLookahead = 0;
    let start = numKnown;
    if (waitsForKv) {
      // Reserve the whole prompt now: once its KV landed, the request never waits for blocks it needs to finish the prompt.
      numLookahead = request.numTokens - numKnown;
    } else {
      // A full hit still computes the last token: its logits give the next token.
      start = Math.min(numKnown, request.numTokens - 1);
      numNew = request.numTokens - start;
      if (!this.config.enableChunkedPrefill && numNew > budget) return { kind: 'blocked' };
      numNew = Math.min(numNew, budget);
      numAllocTokens = Math.max(0, start + numNew - numKnown);
    }

    const newBlockIds = this.kvCacheManager.allocateSlots(request, numAllocTokens, {
      numNewComputedTokens: numLocal,
      newComputedBlocks: hit.blocks,
      numExternalComputedTokens: numExternal,
      numLookaheadTokens: numLookahead,
    });
    if (newBlockIds === null) return { kind: 'blocked' };

    // Counted as hits or rereads once the request uses them (see TokenLedger): a load may still fail.
    this.ledger.admitted(request, numLocal, numKnown);

    let load: IssuedLoad | null = null;
    if (numExternal > 0 && this.connector !== null) {
      const table = this.kvCacheManager.getBlockIds(request);
      load = this.connector.updateStateAfterAlloc(request, table, numExternal);
      checkIssuedLoad(request, numExternal, load, table);
    }

    if (waitsForKv) {
      request.status = 'waitingForCpuTierLoad';
      // Counts the tokens being loaded; the cap to numTokens - 1 applies when it runs.
      request.numComputedTokens = numKnown;
      const jobs = new Set(hit.pendingJobs);
      if (load !== null) {
        this.kvCacheManager.markLoading(request, load.firstBlockIndex, load.gpuBlockIds.length, load.jobId);
        this.ownLoadByRequest.set(request.id, load.jobId);
        this.ownLoadRequestByJob.set(load.jobId, request.id);
        jobs.add(load.jobId);
      }
      this.loadWaits.wait(request.id, jobs);
      return { kind: 'waitsForKv' };
    }

    request.numComputedTokens = start;
    this.startRunning(request);
    return { kind: 'scheduled', entry: { request, numTokens: numNew, newBlockIds } };
  }

  /** A request whose KV landed: computes the rest of its prompt (it holds the blocks already). */
  private scheduleAfterLoad(request: Request, budget: number): StepEntry | null {
    const start = Math.min(request.numComputedTokens, request.numTokens - 1);
    let numNew = request.numTokens - start;
    if (!this.config.enableChunkedPrefill && numNew > budget) return null;
    numNew = Math.min(numNew, budget);
    const savedComputed = request.numComputedTokens;
    request.numComputedTokens = start;
    const newBlockIds = this.kvCacheManager.allocateSlots(request, numNew);
    if (newBlockIds === null) {
      request.numComputedTokens = savedComputed;
      return null;
    }
    this.startRunning(request);
    return { request, numTokens: numNew, newBlockIds };
  }

  private forgetOnWorkers(request: Request): void {
    if (request.knownToWorkersOf === this) request.knownToWorkersOf = null;
    this.knownToWorkers.delete(request);
  }

  private startRunning(request: Request): void {
    request.status = 'running';
    this.running.insert(request);
  }

  private preempt(request: Request): void {
    this.kvCacheManager.free(request);
    request.status = 'preempted';
    request.numComputedTokens = 0;
    request.numPreemptions++;
    this.counters.preemptions++;
    this.observer?.requestsPreempted('out_of_blocks', 1);
    this.forgetOnWorkers(request);
    this.waiting.unshift(request);
  }

  /** Adds a request's tokens to the step; its computed tokens advance now, as in vLLM. */
  private commit(draft: StepDraft, request: Request, numTokens: number, newBlockIds: readonly number[], now: number): void {
    const start = request.numComputedTokens;
    const end = start + numTokens;
    const fresh = request.knownToWorkersOf !== this;
    if (fresh) {
      request.knownToWorkersOf = this;
      this.knownToWorkers.add(request);
    }
    this.ledger.computed(request, start, end);
    request.firstScheduledTime ??= now;
    request.numComputedTokens = end;
    const k = draft.count++;
    draft.requests[k] = StepRequest.of(
      request,
      fresh ? this.kvCacheManager.getBlockIds(request) : null,
      fresh ? NO_IDS : newBlockIds,
      start,
      numTokens === 1 ? singleToken(request.tokenAt(start)) : request.tokensBetween(start, end),
      end === request.numTokens,
    );
    draft.scheduled[k] = request;
    if (this.stepClock !== null) this.stepWork.add(start, numTokens, end === request.numTokens);
    if (draft.views !== null) {
      draft.views[k] = StepRequestView.of(request, this.kvCacheManager.blockIdsView(request), numTokens, fresh);
    }
    draft.totalTokens += numTokens;
  }

  private buildOutput(step: number, draft: StepDraft, preemptedReqIds: string[]): SchedulerOutput {
    draft.requests.length = draft.count;
    draft.scheduled.length = draft.count;
    if (draft.views !== null) draft.views.length = draft.count;
    const finishedReqIds = this.finishedSinceLastStep;
    this.finishedSinceLastStep = [];
    this.lastStep = { step, scheduled: draft.scheduled };
    let offload = null;
    if (this.connector !== null && draft.views !== null) {
      offload = this.connector.buildConnectorMeta({ step, scheduled: draft.views, preemptedReqIds });
    }
    const { requests, totalTokens: totalScheduledTokens } = draft;
    if (this.stepClock === null) return { step, requests, totalScheduledTokens, preemptedReqIds, finishedReqIds, offload };
    const computeNs = this.stepClock.computeNs(this.stepWork);
    return { step, requests, totalScheduledTokens, preemptedReqIds, finishedReqIds, offload, computeNs };
  }

  // ------------------------------------------------------- update from output

  /**
   * Applies the merged worker output of `schedulerOutput`'s step: failed
   * loads first, then load completions, then sampled tokens. Returns an
   * update for every request that got a token or finished.
   */
  updateFromOutput(schedulerOutput: SchedulerOutput, output: ModelRunnerOutput): RequestUpdate[] {
    const failedUpdates: RequestUpdate[] | null = output.invalidBlockIds.size > 0 ? [] : null;
    const dropTokens =
      failedUpdates !== null ? this.recoverFromInvalidBlocks(output.invalidBlockIds, failedUpdates) : null;

    for (const job of output.finishedJobs) {
      if (job.direction !== 'cpuToGpu') continue;
      // The load ended on every rank: a later failure of these blocks is a new one.
      for (const id of job.failedGpuBlockIds) this.invalidBlocksCounted.delete(id);
      const failed = job.ok || this.testOnly.keepInvalidBlocksCached ? NO_IDS : job.failedGpuBlockIds;
      this.kvCacheManager.completeLoading(job.jobId, failed);
      // Waiting requests that no longer wait for anything run from the next step on.
      this.loadWaits.complete(job.jobId);
      const owner = this.ownLoadRequestByJob.get(job.jobId);
      if (owner !== undefined) {
        this.ownLoadRequestByJob.delete(job.jobId);
        this.ownLoadByRequest.delete(owner);
      }
      const released = this.holds.loadFinished(job.jobId);
      if (released !== null) this.kvCacheManager.free(released);
    }
    this.connector?.updateConnectorOutput(output);
    const failedReads = this.connector?.takeFailedReads?.() ?? null;
    if (failedReads !== null && failedReads.length > 0) this.applyFailedReads(failedReads);
    for (const reqId of output.finishedSending) {
      const released = this.holds.sendingFinished(reqId);
      if (released !== null) this.kvCacheManager.free(released);
    }

    let runningFinished = false;
    const now = this.now();
    const batch = schedulerOutput.requests;
    // At most one update per scheduled request: filled by index and cut to length.
    const updates = this.stepUpdates;
    let numUpdates = 0;
    const known = this.lastStep !== null && this.lastStep.step === schedulerOutput.step ? this.lastStep.scheduled : null;
    for (let k = 0; k < batch.length; k++) {
      if (!batch[k].sample) continue;
      const request = known !== null ? known[k] : this.requests.get(batch[k].reqId);
      // Aborted (or failed) since the step was scheduled.
      if (request === undefined || request.isFinished) continue;
      // Sampled from invalid KV: dropped, and an end condition inside it is ignored.
      if (dropTokens !== null && dropTokens.has(request.id)) continue;
      const token = k < output.sampledTokens.length ? output.sampledTokens[k] : NO_TOKEN;
      if (token === NO_TOKEN) {
        throw new EngineError(`step ${schedulerOutput.step}: no sampled token for request '${request.id}'`);
      }
      request.appendOutputToken(token);
      request.firstTokenTime ??= now;
      this.counters.outputTokens++;
      let status: FinishedStatus | null = null;
      if (request.stopToken !== null && token === request.stopToken) status = 'finishedStopped';
      else if (request.numTokens - request.numPromptTokens >= request.maxTokens) status = 'finishedLength';
      if (status === null) {
        updates[numUpdates++] = SampledTokenUpdate.of(request, token);
      } else {
        if (request.status === 'running') runningFinished = true;
        this.finish(request, status);
        updates[numUpdates++] = { reqId: request.id, newTokenIds: [token], token, owner: request.owner, finishReason: finishReasonOf(status) };
      }
    }
    if (runningFinished) this.running.removeFinished();
    updates.length = numUpdates;
    // Requests failed by invalid blocks come first, as they were found before any token was applied.
    return failedUpdates === null || failedUpdates.length === 0 ? updates : failedUpdates.concat(updates);
  }

  /**
   * Failed remote reads (docs/architecture.md, "Failure recovery"): the
   * blocks count as failed loads (cause remote), and the waiting request
   * computes them under every failure policy. The engine never held those
   * blocks, so a failed read is a miss; failurePolicy 'fail' is about blocks
   * the GPU and CPU tiers held and lost.
   */
  private applyFailedReads(reads: readonly FailedExternalRead[]): void {
    for (const read of reads) {
      this.counters.failedLoadBlocks += read.blocks;
      this.observer?.remoteReadsFailed?.(read.blocks);
      const request = this.requests.get(read.reqId);
      if (request === undefined || request.isFinished) continue;
      if (!this.recoveredRequests.has(request.id)) {
        this.recoveredRequests.add(request.id);
        this.counters.requestsRecovered++;
      }
    }
  }

  /**
   * Failed loads (docs/architecture.md, "Failure recovery"): every request computed through an
   * invalid block is truncated to the start of its first invalid block (or,
   * under failurePolicy 'fail', finishes with an error), and the invalid
   * blocks leave the prefix cache. Returns the requests whose tokens sampled
   * in this step must be dropped.
   */
  private recoverFromInvalidBlocks(invalidBlockIds: ReadonlySet<number>, updates: RequestUpdate[]): Set<string> {
    for (const id of invalidBlockIds) {
      if (this.invalidBlocksCounted.has(id)) continue;
      this.invalidBlocksCounted.add(id);
      this.counters.failedLoadBlocks++;
    }
    const dropTokens = new Set<string>();
    if (!this.testOnly.keepInvalidBlocksCached) this.kvCacheManager.removeFromPrefixCache(invalidBlockIds);
    if (this.testOnly.skipInvalidBlockRecovery) return dropTokens;

    const candidates = [...this.running.toArray(), ...this.waiting];
    const uses = findInvalidBlockUses(candidates, invalidBlockIds, this.kvCacheManager);
    let anyRunningFailed = false;
    for (const use of uses) {
      const { request } = use;
      if (!this.testOnly.keepTokensSampledFromInvalidKv) dropTokens.add(request.id);
      if (this.config.failurePolicy === 'fail') {
        const message =
          `KV load failed for GPU block ${use.blockId} (block ${use.blockIndex} of request '${request.id}'); ` +
          `failurePolicy is 'fail'`;
        if (request.status === 'running') anyRunningFailed = true;
        else this.waiting.splice(this.waiting.indexOf(request), 1);
        this.finish(request, 'finishedError', message);
        this.counters.requestsFailedByLoad++;
        updates.push({ reqId: request.id, newTokenIds: [], owner: request.owner, finishReason: 'error', errorMessage: message });
      } else {
        request.numComputedTokens = use.validTokens;
        this.kvCacheManager.recacheFrom(request, use.blockIndex);
        if (!this.recoveredRequests.has(request.id)) {
          this.recoveredRequests.add(request.id);
          this.counters.requestsRecovered++;
        }
      }
    }
    if (anyRunningFailed) this.running.removeFinished();
    return dropTokens;
  }

  // ------------------------------------------------------------ finishing

  /** Removes a request from the running list or the waiting queue. */
  private detach(request: Request): void {
    if (request.status === 'running') {
      this.running.remove(request);
      return;
    }
    const index = this.waiting.indexOf(request);
    if (index >= 0) this.waiting.splice(index, 1);
  }

  /**
   * Marks a request finished and releases its blocks, unless a load it issued
   * is still writing them or the connector's stores still read them.
   */
  private finish(request: Request, status: FinishedStatus, errorMessage: string | null = null): void {
    request.status = status;
    request.errorMessage = errorMessage;
    request.finishTime = this.now();
    this.requests.delete(request.id);
    this.addOrder.delete(request.id);
    this.forgetOnWorkers(request);
    this.loadWaits.drop(request.id);
    this.finishedSinceLastStep.push(request.id);
    this.recoveredRequests.delete(request.id);
    if (status === 'finishedAborted') this.counters.requestsAborted++;
    else if (status === 'finishedError') this.counters.requestsFailed++;
    else this.counters.requestsFinished++;
    this.observer?.requestFinished(request);

    const hasBlocks = this.kvCacheManager.hasBlocks(request);
    const blockIds = hasBlocks ? this.kvCacheManager.getBlockIds(request) : [];
    const storesReadBlocks = this.connector !== null ? this.connector.requestFinished(request, blockIds) : false;
    if (!hasBlocks) return;
    const loadJob = this.ownLoadByRequest.get(request.id) ?? null;
    if (loadJob !== null || storesReadBlocks) this.holds.hold(request, loadJob, storesReadBlocks);
    else this.kvCacheManager.free(request);
  }

  // ------------------------------------------------------------ rank loss

  /**
   * Every GPU block and the whole CPU tier were lost: running and loading
   * requests go back to waiting with nothing computed (tokens already returned
   * stay), every block is freed and uncached, and the connector forgets its
   * tier. The next step tells the workers to drop those requests' tables.
   */
  resetForRankLoss(): void {
    this.counters.rankResets++;
    const wasRunning = this.running.takeAll();
    let lostKv = wasRunning.length;
    for (const request of this.waiting) if (request.status === 'waitingForCpuTierLoad') lostKv++;
    if (lostKv > 0) this.observer?.requestsPreempted('rank_loss', lostKv);
    for (const request of wasRunning) request.status = 'waiting';
    for (const request of this.waiting) if (request.status === 'waitingForCpuTierLoad') request.status = 'waiting';
    for (const request of [...wasRunning, ...this.waiting]) request.numComputedTokens = 0;
    this.waiting = [...wasRunning, ...this.waiting];
    for (const request of this.knownToWorkers) {
      this.droppedByReset.push(request.id);
      request.knownToWorkersOf = null;
    }
    this.knownToWorkers.clear();
    this.loadWaits.clear();
    this.invalidBlocksCounted.clear();
    this.ownLoadByRequest.clear();
    this.ownLoadRequestByJob.clear();
    this.holds.clear();
    this.kvCacheManager.reset();
    this.connector?.reset();
  }

  // ------------------------------------------------------------ inspection

  stats(): SchedulerStats {
    let waitingForLoad = 0;
    for (const request of this.waiting) if (request.status === 'waitingForCpuTierLoad') waitingForLoad++;
    const c = this.counters;
    const ledger = this.ledger;
    return {
      steps: this.stepCount,
      running: this.running.length,
      waiting: this.waiting.length - waitingForLoad,
      waitingForCpuTierLoad: waitingForLoad,
      finishedHoldingBlocks: this.holds.size,
      requestsAdded: c.requestsAdded,
      requestsFinished: c.requestsFinished,
      requestsAborted: c.requestsAborted,
      requestsFailed: c.requestsFailed,
      preemptions: c.preemptions,
      gpuPrefixHitTokens: ledger.gpuPrefixHitTokens,
      cpuTierHitTokens: ledger.cpuTierHitTokens,
      gpuPrefixRereadTokens: ledger.gpuPrefixRereadTokens,
      cpuTierRereadTokens: ledger.cpuTierRereadTokens,
      prefillTokensComputed: ledger.prefillTokensComputed,
      decodeTokensComputed: ledger.decodeTokensComputed,
      recomputedTokens: ledger.recomputedTokens,
      promptTokensReached: ledger.promptTokensReached,
      outputTokens: c.outputTokens,
      loadFailures: {
        blocks: c.failedLoadBlocks,
        requestsRecovered: c.requestsRecovered,
        requestsFailed: c.requestsFailedByLoad,
      },
      rankResets: c.rankResets,
      kvCache: this.kvCacheManager.usage(),
    };
  }

  /** Ids of running requests, in scheduling order. */
  runningIds(): string[] {
    return this.running.toArray().map((r) => r.id);
  }

  /** Ids of queued requests (waiting, preempted, waiting for KV), in queue order. */
  waitingIds(): string[] {
    return this.waiting.map((r) => r.id);
  }
}
