import { performance } from 'node:perf_hooks';
import { EngineError, RankError, RequestError } from '../core/errors.js';
import { resolveBackend } from '../device/native.js';
import type { BackendName } from '../device/types.js';
import { parseFaultPlan } from '../faults/plan.js';
import type { OffloadingSetup } from '../connector/create-connector.js';
import { Request, validateRequestParams, type RequestParams } from '../scheduler/request.js';
import type { RequestUpdate, Scheduler } from '../scheduler/scheduler.js';
import type { KVOutputAggregator } from './aggregator.js';
import { resolveEngineConfig, type EngineConfig } from './engine-config.js';
import { behaviourSwitchesOf, registerEngineParts, type EngineSwitches } from './engine-internals.js';
import type {
  EngineConfigInput,
  EngineMetrics,
  FinishedRequest,
  FinishReason,
  RequestSpec,
  StepReport,
} from './engine-types.js';
import { Executor } from './executor.js';
import { PromptHashPool } from './hash-pool.js';
import type { TransferMetrics } from '../metrics/transfer-metrics.js';
import type { EngineMonitor } from '../metrics/engine-monitor.js';
import { readGauges, type MonitoringSnapshot } from '../metrics/gauges.js';
import type { EngineEventLog, EngineLogger } from '../log/engine-events.js';
import type { RankReady } from '../rank/rank-protocol.js';
import { stepClockFor } from '../timing/step-cost.js';
import { chooseGpuProfile, describeStepClock, type GpuProfileChoice } from './gpu-profile-choice.js';
import type { RemoteTierConnector } from '../remote/remote-connector.js';
import { assembleEngine, type EngineAssembly } from './assembly/assemble-engine.js';
import { engineAssemblyConfig, engineGeometry } from './assembly/engine-config-parts.js';
import { StepObservers, type StepObserver } from './step-observer.js';
import { DeviceSpanRecorder, type RecordedDeviceSpans } from './device-span-recorder.js';
import { KvEventRecorder, type KvEventListener } from '../events/kv-event-recorder.js';
import type { KvEventCollector } from '../events/kv-cache-events.js';
import { KvEventCollectors, type EventReportingTier } from '../events/kv-event-collectors.js';
import { KvEventStream, type KvEventStreamOptions } from '../events/kv-event-stream.js';
import { cacheTierMetrics } from './cache-tier-metrics.js';

export interface EngineOptions {
  /** Called as each rank finished opening its device at start (to show start-up progress). */
  readonly onRankOpened?: (rank: number) => void;
  /** Where rank deaths, restarts, fault-plan activations and slow steps are logged (e.g. a pino logger); none by default. */
  readonly logger?: EngineLogger | null;
  /** Steps slower than this (ms, wall time) are logged as warnings; default: none are. */
  readonly slowStepMs?: number | null;
  /**
   * Keep every rank's forwards and copy jobs as its device timed them, for
   * deviceSpans() (a device trace); off by default, when nothing is kept.
   */
  readonly deviceTrace?: boolean;
}

/** Rounds of restart-and-reset tried after a rank loss before the engine gives up. */
const MAX_RECOVERY_ATTEMPTS = 3;

/**
 * The engine stopped: a rank died (`rankError`; `finished` holds the requests
 * it ended with an error), or it was shut down while a call was under way
 * (`rankError` is null).
 */
export class EngineStoppedError extends EngineError {
  readonly rankError: RankError | null;
  readonly finished: readonly FinishedRequest[];

  constructor(rankError: RankError | null, finished: readonly FinishedRequest[]) {
    super(rankError ? `engine stopped: ${rankError.message}` : 'engine stopped: it was shut down', { cause: rankError ?? undefined });
    this.rankError = rankError;
    this.finished = finished;
  }
}

function isObject(value: unknown): boolean {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A value for an error message: primitives as they are, anything else by its kind. */
function describeValue(value: unknown): string {
  if (typeof value === 'string') return `'${value.length > 40 ? `${value.slice(0, 37)}...` : value}'`;
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : Object.prototype.toString.call(value);
}

/**
 * kvtier's library API: create an engine from one config, add requests, step
 * or run them to completion, abort, read metrics, shut down. Every step runs
 * on all ranks; outputs never depend on where the KV came from.
 */
export class Engine {
  private readonly live = new Map<string, Request>();
  private readonly pendingFinished: FinishedRequest[] = [];
  private nextId = 0;
  private promptTokens = 0;
  private rankRestarts = 0;
  private stopped: EngineStoppedError | null = null;
  private closed = false;
  private readonly scheduler: Scheduler;
  private readonly offloading: OffloadingSetup | null;
  private readonly remote: RemoteTierConnector | null;
  private readonly executor: Executor;
  private readonly aggregator: KVOutputAggregator;
  private readonly monitor: EngineMonitor;
  private readonly transfers: TransferMetrics;
  private readonly events: EngineEventLog;
  private readonly observer: StepObserver;
  /** KV events: reported from the first collector on (an engine nobody listens to reports nothing). */
  private kvEventCollectors: KvEventCollectors | null = null;
  /** The in-process collector of listeners and kvEvents() streams, made for the first listener. */
  private kvEventRecorder: KvEventRecorder | null = null;

  private constructor(
    readonly config: EngineConfig,
    readonly backend: BackendName,
    /** The GPU profile of the step clock (and, on the host backend, of the host link). */
    readonly gpu: GpuProfileChoice,
    /** How reports name the step clock (describeStepClock). */
    private readonly stepClockDescription: string,
    private readonly parts: EngineAssembly<Executor>,
    private readonly hashPool: PromptHashPool,
    private readonly startedAt: number,
    private readonly switches: EngineSwitches,
    /** Every rank's device spans, when the engine traces its devices. */
    private readonly deviceSpanRecorder: DeviceSpanRecorder | null,
  ) {
    this.scheduler = parts.scheduler;
    this.offloading = parts.tiers.offloading;
    this.remote = parts.tiers.remote;
    this.executor = parts.ranks;
    this.aggregator = parts.aggregator;
    this.monitor = parts.monitor;
    this.transfers = parts.transfers;
    this.events = parts.events;
    this.observer = deviceSpanRecorder === null ? parts.observer : new StepObservers([parts.observer, deviceSpanRecorder]);
    registerEngineParts(this, { scheduler: this.scheduler, offloading: this.offloading, executor: this.executor, aggregator: this.aggregator });
  }

  static async create(input: EngineConfigInput = {}, options: EngineOptions = {}): Promise<Engine> {
    const config = resolveEngineConfig(input);
    const switches = behaviourSwitchesOf(options);
    const backend = resolveBackend(config.backend);
    const faults = parseFaultPlan(config.faults, config.faultSeed);
    const gpu = chooseGpuProfile(config.gpu, backend);
    const stepClock = stepClockFor(config.model, gpu.profile, config.tp);
    // Without a GPU, transfers take as long as the profile's host link would.
    const hostLink = backend === 'host' ? gpu.profile.link : null;
    const startedAt = performance.now();
    const assembly = engineAssemblyConfig(config, backend, faults, hostLink);
    const deviceSpans = options.deviceTrace === true ? new DeviceSpanRecorder() : null;
    // An unreachable remote stops the engine here, before any rank starts.
    const parts = await assembleEngine(
      engineGeometry(config),
      deviceSpans === null ? assembly : { ...assembly, device: { ...assembly.device, deviceTrace: true } },
      {
        switches,
        logger: options.logger ?? null,
        slowStepMs: options.slowStepMs,
        scheduler: { now: () => performance.now() - startedAt, stepClock },
      },
      {
        start: (ranks) =>
          Executor.start({ ranks, stepDeadlineMs: config.stepDeadlineMs, initDeadlineMs: config.startDeadlineMs, onRankOpened: options.onRankOpened }),
        stop: (executor) => executor.terminateAll(),
      },
    );
    return new Engine(
      config,
      backend,
      gpu,
      describeStepClock(stepClock, gpu),
      parts,
      new PromptHashPool(config.blockSize),
      startedAt,
      switches.engine ?? {},
      deviceSpans,
    );
  }

  /**
   * Every rank's forwards and copy jobs as its device timed them, step by
   * step; null unless the engine was created with `deviceTrace`.
   */
  deviceSpans(): readonly RecordedDeviceSpans[] | null {
    return this.deviceSpanRecorder?.spans() ?? null;
  }

  /** What each rank opened (device name, bytes per block, memory). */
  get ranks(): readonly RankReady[] {
    return this.executor.ready;
  }

  /** Milliseconds since the engine started (the clock of every timestamp it reports). */
  now(): number {
    return performance.now() - this.startedAt;
  }

  /**
   * Validates and queues one request; returns its id. Nothing is queued if
   * it is rejected. `owner` comes back with each of its step updates
   * (StepReport.tokenUpdates), so a caller finds its own record of the
   * request without a lookup by id.
   */
  addRequest(spec: RequestSpec, owner: unknown = null): string {
    this.assertUsable();
    const params = this.requestParams(spec, 'request', new Set());
    const request = new Request(params, this.config.blockSize);
    request.owner = owner;
    this.admit(request);
    return request.id;
  }

  /**
   * Validates and queues many requests, hashing their prompt blocks off the
   * engine loop. All are validated (by the same rules as addRequest) before
   * any is converted or queued: one bad request rejects the batch and nothing
   * of it is accepted.
   */
  async addRequests(specs: readonly RequestSpec[]): Promise<string[]> {
    this.assertUsable();
    if (!Array.isArray(specs)) throw new RequestError(`requests: expected an array of requests, got ${describeValue(specs)}`);
    const callerIds = new Set<string>();
    for (const [i, spec] of specs.entries()) {
      const id = isObject(spec) ? (spec as RequestSpec).id : undefined;
      if (id === undefined) continue;
      if (typeof id === 'string' && callerIds.has(id)) throw new RequestError(`requests[${i}]: request id '${id}' is already in use`);
      callerIds.add(id);
    }
    const taken = new Set(callerIds);
    const params = specs.map((spec, i) => this.requestParams(spec, `requests[${i}]`, taken));
    const prompts = params.map((p) => Int32Array.from(p.promptTokens));
    let hashes: string[][];
    try {
      hashes = await this.hashPool.hash(prompts, params.map((p) => p.cacheSalt ?? null));
    } catch (error) {
      this.assertStillUsable();
      throw error;
    }
    this.assertStillUsable();
    // Requests added while the batch was hashed may have taken an id of it.
    const requests = params.map((p, i) => {
      let id = p.id;
      if (this.live.has(id)) {
        if (callerIds.has(id)) throw new RequestError(`requests[${i}]: request id '${id}' is already in use`);
        id = this.generateId(taken);
        taken.add(id);
      }
      return new Request({ ...p, id, promptTokens: prompts[i], promptBlockHashes: hashes[i] }, this.config.blockSize);
    });
    for (const request of requests) this.admit(request);
    return requests.map((r) => r.id);
  }

  /** Aborts a request in any state; false if it is unknown or already finished. */
  abort(id: string): boolean {
    this.assertUsable();
    const request = this.live.get(id);
    if (!request || !this.scheduler.abortRequest(id)) return false;
    this.live.delete(id);
    this.pendingFinished.push(this.finishedRecord(request, 'aborted', null));
    return true;
  }

  /** true while requests are unfinished or transfers still have to complete. */
  hasPendingWork(): boolean {
    return !this.stopped && (this.scheduler.hasPendingWork() || this.pendingFinished.length > 0);
  }

  /** Runs one step on every rank. */
  async step(): Promise<StepReport> {
    this.assertUsable();
    const started = performance.now();
    const schedulerOutput = this.scheduler.schedule();
    this.observer.stepScheduled(schedulerOutput);
    let outputs;
    try {
      outputs = await this.executor.executeStep(schedulerOutput);
    } catch (error) {
      if (error instanceof RankError) return this.recoverFromRankFailure(schedulerOutput.step, error);
      throw error;
    }
    const output = this.aggregator.aggregate(outputs, schedulerOutput);
    this.observer.stepAnswered(outputs, output);
    const updates = this.scheduler.updateFromOutput(schedulerOutput, output);
    this.kvEventCollectors?.flush();
    this.observer.stepFinished(schedulerOutput.step, performance.now() - started, outputs);
    return this.report(schedulerOutput.step, updates);
  }

  /** Steps until every request finished and every transfer completed. */
  async run(onStep?: (report: StepReport) => void): Promise<FinishedRequest[]> {
    this.assertUsable();
    const finished: FinishedRequest[] = [];
    while (this.hasPendingWork()) {
      const report = await this.step();
      finished.push(...report.finished);
      onStep?.(report);
    }
    return finished;
  }

  metrics(): EngineMetrics {
    const s = this.scheduler.stats();
    const tier = this.offloading?.manager.stats();
    const transfers = this.transfers.snapshot();
    return {
      steps: s.steps,
      preemptions: s.preemptions,
      requests: {
        added: s.requestsAdded,
        finished: s.requestsFinished,
        aborted: s.requestsAborted,
        failed: s.requestsFailed,
      },
      tokens: {
        prompt: this.promptTokens,
        output: s.outputTokens,
        prefillComputed: s.prefillTokensComputed,
        recomputed: s.recomputedTokens,
        promptReached: s.promptTokensReached,
      },
      ...cacheTierMetrics(s),
      ...(this.remote ? { remote: this.remote.snapshot() } : {}),
      transfers,
      loadFailures: { blocks: s.loadFailures.blocks, requestsRecovered: s.loadFailures.requestsRecovered },
      storeFailures: transfers.gpuToCpu.failedJobs,
      rankRestarts: this.rankRestarts,
      leaks: {
        gpuBlocks: s.kvCache.referenced,
        cpuBlocks: tier ? tier.beingStoredBlocks + tier.pinnedBlocks : 0,
      },
      stepClock: {
        description: this.stepClockDescription,
        modelledComputeMs: this.monitor.computeClock.modelledMs,
        forwardMs: this.monitor.computeClock.forwardMs,
      },
    };
  }

  /**
   * Calls `listener` with each step's KV events (blocks entering and leaving
   * the GPU prefix cache and the CPU tier, see src/events); returns the
   * function that stops it. Events are recorded from the first listener on:
   * add it before the first request so the events describe every block.
   */
  addKvEventListener(listener: KvEventListener): () => void {
    if (this.kvEventRecorder === null) {
      this.kvEventRecorder = new KvEventRecorder();
      this.addKvEventCollector(this.kvEventRecorder);
    }
    return this.kvEventRecorder.addListener(listener);
  }

  /**
   * Feeds `collector` (src/events/kv-cache-events.ts) the tiers' events and
   * the end of each step from now on, as addKvEventListener does for
   * listeners; returns the function that stops it. The KV event thread's
   * ring is one: the engine's thread then only writes integers per event.
   */
  addKvEventCollector(collector: KvEventCollector): () => void {
    if (this.kvEventCollectors === null) {
      const tiers: EventReportingTier[] = [{ medium: 'GPU', blockSize: this.config.blockSize, setEventSink: (sink) => this.scheduler.kvCacheManager.pool.setEventSink(sink) }];
      const manager = this.offloading?.manager;
      if (manager?.setEventSink !== undefined) {
        tiers.push({ medium: 'CPU', blockSize: this.config.blockSize * this.config.offloadFactor, setEventSink: (sink) => manager.setEventSink?.(sink) });
      }
      this.kvEventCollectors = new KvEventCollectors(tiers);
    }
    return this.kvEventCollectors.add(collector);
  }

  /** The KV event batches as an async iterator (see addKvEventListener for when recording starts). */
  kvEvents(options?: KvEventStreamOptions): KvEventStream {
    return new KvEventStream(this, options);
  }

  /** Latency histograms and live gauges (what createMetricsRegistry exports besides metrics()). Cheap: read at scrape time. */
  monitoring(): MonitoringSnapshot {
    return {
      monitor: this.monitor,
      gauges: readGauges({
        scheduler: this.scheduler.stats(),
        gpuEvictedBlocks: this.scheduler.kvCacheManager.pool.evictedBlocks,
        cpuTier: this.offloading?.manager.stats() ?? null,
        monitor: this.monitor,
        ranksAlive: this.executor.ranksAlive(),
      }),
    };
  }

  /** Rank worker threads still running (0 after shutdown). */
  liveRankThreads(): number {
    return this.executor.liveThreads();
  }

  /** Stops every rank and frees their devices. */
  async shutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.hashPool.close();
    if (this.stopped) await this.executor.terminateAll();
    else await this.executor.shutdown();
    await this.parts.close();
  }

  private assertUsable(): void {
    if (this.closed) throw new EngineError('engine is shut down');
    if (this.stopped) throw this.stopped;
  }

  /**
   * The one validation of a request, shared by addRequest and addRequests:
   * it checks the caller's values as given (a prompt of 1.5 or 'hello' is
   * refused, never converted) and returns the parameters to build it from.
   * `taken` holds ids already chosen in the same batch.
   */
  private requestParams(spec: unknown, where: string, taken: Set<string>): RequestParams {
    if (!isObject(spec)) throw new RequestError(`${where}: expected a request object, got ${describeValue(spec)}`);
    const s = spec as RequestSpec;
    let id: string;
    if (s.id === undefined) {
      id = this.generateId(taken);
    } else {
      id = s.id;
      if (typeof id === 'string' && this.live.has(id)) throw new RequestError(`${where}: request id '${id}' is already in use`);
    }
    const params: RequestParams = {
      id,
      promptTokens: s.promptTokens,
      maxTokens: s.maxTokens,
      seed: s.seed ?? 0,
      stopToken: s.stopToken ?? null,
      cacheSalt: s.cacheSalt ?? null,
      arrivalTime: this.arrivalTime(s.arrivalMs, where),
    };
    try {
      validateRequestParams(params, this.scheduler.requestLimits);
    } catch (error) {
      if (error instanceof RequestError && where !== 'request') throw new RequestError(`${where}: ${error.message}`);
      throw error;
    }
    taken.add(id);
    return params;
  }

  /** A fresh id that no live request and no request of the batch being added (`taken`) uses. */
  private generateId(taken: ReadonlySet<string>): string {
    let id = `req-${this.nextId++}`;
    while (this.live.has(id) || taken.has(id)) id = `req-${this.nextId++}`;
    return id;
  }

  /** After an await inside addRequests: the engine may have been shut down or stopped meanwhile. */
  private assertStillUsable(): void {
    if (this.stopped) throw this.stopped;
    if (this.closed) throw new EngineStoppedError(null, []);
  }

  private arrivalTime(arrivalMs: number | undefined, where: string): number {
    const now = this.now();
    if (arrivalMs === undefined) return now;
    if (typeof arrivalMs !== 'number' || !Number.isFinite(arrivalMs) || arrivalMs < 0 || arrivalMs > now) {
      throw new RequestError(`${where}: arrivalMs ${describeValue(arrivalMs)} must be a time on the engine clock in [0, ${now.toFixed(1)}]`);
    }
    return arrivalMs;
  }

  private admit(request: Request): void {
    this.scheduler.addRequest(request);
    this.live.set(request.id, request);
    this.promptTokens += request.numPromptTokens;
  }

  private report(step: number, updates: readonly RequestUpdate[]): StepReport {
    const finished = this.pendingFinished.splice(0);
    const newTokens = new Map<string, readonly number[]>();
    for (const update of updates) {
      if (update.newTokenIds.length > 0) newTokens.set(update.reqId, update.newTokenIds);
      if (update.finishReason === undefined) continue;
      const request = this.live.get(update.reqId);
      if (!request) continue;
      this.live.delete(update.reqId);
      finished.push(this.finishedRecord(request, update.finishReason, update.errorMessage ?? null));
    }
    return { step, finished, newTokens, tokenUpdates: updates };
  }

  private finishedRecord(request: Request, reason: FinishReason, errorMessage: string | null): FinishedRequest {
    return {
      id: request.id,
      promptTokens: request.promptTokens,
      outputTokens: request.outputTokens.slice(),
      maxTokens: request.maxTokens,
      seed: request.seed,
      stopToken: request.stopToken,
      finishReason: reason,
      errorMessage: errorMessage ?? request.errorMessage,
      arrivalMs: request.arrivalTime,
      firstScheduledMs: request.firstScheduledTime,
      firstTokenMs: request.firstTokenTime,
      finishMs: request.finishTime ?? this.now(),
      numPreemptions: request.numPreemptions,
      gpuPrefixHitTokens: request.gpuPrefixHitTokens,
      cpuTierHitTokens: request.cpuTierHitTokens,
      // The remote side counts the tokens its blocks offered; a whole-prompt hit takes one fewer (the last prompt token is computed).
      remoteHitTokens: Math.min(request.remoteHitTokens, request.cpuTierHitTokens),
      gpuPrefixRereadTokens: request.gpuPrefixRereadTokens,
      cpuTierRereadTokens: request.cpuTierRereadTokens,
    };
  }

  /**
   * A rank died or missed its deadline. Without rankRestart every unfinished
   * request ends with an error naming the rank and the engine stops. With it,
   * dead ranks are respawned and every rank drops its state; since the lost
   * rank's GPU blocks and CPU shard are gone, the scheduler drops the whole
   * GPU prefix cache and CPU tier too (every rank and the scheduler agree
   * nothing survived), and requests resume by recompute (tokens of the failed
   * step are discarded). A rank that dies while being restarted or reset is
   * restarted in the next round; after MAX_RECOVERY_ATTEMPTS rounds the engine
   * stops.
   */
  private async recoverFromRankFailure(step: number, error: RankError): Promise<StepReport> {
    this.events.rankLost(step, error, this.config.rankRestart);
    if (!this.config.rankRestart) return this.stop(step, error);
    let failure = error;
    for (let attempt = 1; attempt <= MAX_RECOVERY_ATTEMPTS; attempt++) {
      try {
        const restarted = await this.executor.restartDeadRanks();
        this.events.ranksRestarted(step, restarted, attempt);
        await this.executor.resetRanks();
      } catch (recoveryError) {
        if (!(recoveryError instanceof RankError)) throw recoveryError;
        failure = recoveryError;
        continue;
      }
      this.scheduler.resetForRankLoss();
      this.kvEventCollectors?.flush();
      this.observer.transfersDropped();
      // Reports of the lost state must not count toward jobs or requests of the new one.
      if (!this.switches.keepPartialReportsOnRankLoss) this.aggregator.reset();
      this.rankRestarts += 1;
      return { step, finished: this.pendingFinished.splice(0), newTokens: new Map(), tokenUpdates: [] };
    }
    return this.stop(
      step,
      new RankError(failure.rank, `${failure.cause_} (no recovery after ${MAX_RECOVERY_ATTEMPTS} restart attempts)`, {
        cause: failure,
      }),
    );
  }

  private async stop(step: number, error: RankError): Promise<never> {
    const finished = this.pendingFinished.splice(0);
    for (const request of this.live.values()) {
      finished.push(this.finishedRecord(request, 'error', `request ended because ${error.message}`));
    }
    this.live.clear();
    this.events.engineStopped(step, error, finished.length);
    this.stopped = new EngineStoppedError(error, finished);
    await this.executor.terminateAll();
    // The devices are gone with their threads: nothing holds blocks or transfers anymore.
    this.scheduler.resetForRankLoss();
    this.kvEventCollectors?.flush();
    this.observer.transfersDropped();
    this.aggregator.reset();
    throw this.stopped;
  }
}
