export { promptOf, Rng } from '../support/random.js';
import { blockHashes, type BlockHash } from '../../src/core/block-hash.js';
import { TINY } from '../support/tiny.js';
import { chainStates, referenceGenerate } from '../../src/model/reference.js';
import { parseSchedulerConfig, type SchedulerConfig, type SchedulerConfigInput } from '../../src/scheduler/config.js';
import type {
  ExternalMatch,
  IssuedLoad,
  SchedulerConnector,
  StepView,
} from '../../src/scheduler/connector-port.js';
import {
  NO_TOKEN,
  type ModelRunnerOutput,
  type OffloadStepMetadata,
  type SchedulerOutput,
  type TransferJobSpec,
} from '../../src/protocol/step-protocol.js';
import { createRequest, type Request, type RequestParams } from '../../src/scheduler/request.js';
import type { RequestUpdate, Scheduler, SchedulerOptions } from '../../src/scheduler/scheduler.js';
import { kvGeometry } from '../../src/core/kv-geometry.js';
import { assembleSimulatedEngine } from '../../src/sim/assemble-simulated.js';
import type { SimulatedEngine, SimulatedStep } from '../../src/sim/simulated-engine.js';
import { kept } from '../support/kept-step.js';
import type { LoadFaultInjector, PerRank, SimulatedRanks } from '../../src/sim/simulated-ranks.js';

export { TINY };

/** A small scheduler config: blocks of 4 tokens, so scenarios stay short. */
export function tinyConfig(overrides: Partial<SchedulerConfigInput> = {}): SchedulerConfig {
  return parseSchedulerConfig({
    blockSize: 4,
    numGpuBlocks: 64,
    maxNumBatchedTokens: 64,
    maxNumSeqs: 16,
    maxModelLen: 128,
    vocabSize: TINY.vocabSize,
    ...overrides,
  });
}


export interface RequestSketch {
  readonly prompt: readonly number[];
  readonly maxTokens: number;
  readonly seed?: number;
  readonly arrivalTime?: number;
  readonly stopToken?: number | null;
  readonly cacheSalt?: string | null;
}

export function requestFor(scheduler: Scheduler, id: string, sketch: RequestSketch): Request {
  const params: RequestParams = {
    id,
    promptTokens: sketch.prompt,
    maxTokens: sketch.maxTokens,
    seed: sketch.seed ?? 7,
    arrivalTime: sketch.arrivalTime ?? 0,
    stopToken: sketch.stopToken ?? null,
    cacheSalt: sketch.cacheSalt ?? null,
  };
  return createRequest(params, scheduler.requestLimits);
}

/** The tokens the reference model generates for a request, independent of any cache. */
export function referenceTokens(sketch: RequestSketch): number[] {
  return referenceGenerate(TINY, {
    promptTokens: sketch.prompt,
    maxTokens: sketch.maxTokens,
    seed: sketch.seed ?? 7,
    stopToken: sketch.stopToken ?? null,
  }).outputTokens;
}

/** An output for `step` that reports nothing but the given sampled tokens (by request id). */
export function outputWith(step: SchedulerOutput, sampled: Iterable<[string, number]> = [], extra: Partial<ModelRunnerOutput> = {}): ModelRunnerOutput {
  const tokens = new Int32Array(step.requests.length).fill(NO_TOKEN);
  for (const [id, token] of sampled) tokens[step.requests.findIndex((r) => r.reqId === id)] = token;
  return {
    step: step.step,
    sampledTokens: tokens,
    finishedJobs: [],
    finishedSending: new Set(),
    finishedRecving: new Set(),
    invalidBlockIds: new Set(),
    ...extra,
  };
}

/**
 * A connector over a CPU tier seeded with the reference KV of chosen token
 * sequences: it matches the request's blocks the tier holds right after its
 * GPU prefix hit and issues one load job for them.
 */
export class SeededTierConnector implements SchedulerConnector {
  loadAsync: boolean;
  readonly issuedLoads: TransferJobSpec[] = [];
  readonly finishedJobIds: number[] = [];
  lookups = 0;
  private readonly ranks: SimulatedRanks;
  private readonly blockSize: number;
  private readonly cpuByHash = new Map<BlockHash, number>();
  private nextCpuBlock = 0;
  private nextJobId = 1;
  private loadsThisStep: TransferJobSpec[] = [];
  private readonly inFlight = new Set<number>();
  private readonly matchStart = new Map<string, number>();

  constructor(ranks: SimulatedRanks, options: { loadAsync?: boolean } = {}) {
    this.ranks = ranks;
    this.blockSize = ranks.blockSize;
    this.loadAsync = options.loadAsync ?? true;
  }

  /** Puts the reference KV of every full block of `tokens` in the tier. */
  seed(tokens: readonly number[], cacheSalt: string | null = null): void {
    const states = chainStates(TINY, tokens);
    const hashes = blockHashes(tokens, this.blockSize, cacheSalt);
    hashes.forEach((hash, i) => {
      if (this.cpuByHash.has(hash)) return;
      const cpuBlock = this.nextCpuBlock++;
      this.ranks.writeCpuStates(cpuBlock, states.subarray(i * this.blockSize, (i + 1) * this.blockSize));
      this.cpuByHash.set(hash, cpuBlock);
    });
  }

  getNumNewMatchedTokens(request: Request, numComputedTokens: number): ExternalMatch | null {
    this.lookups++;
    const start = numComputedTokens / this.blockSize;
    let n = 0;
    while (start + n < request.blockHashes.length && this.cpuByHash.has(request.blockHashes[start + n])) n++;
    this.matchStart.set(request.id, start);
    return { numTokens: n * this.blockSize, loadAsync: this.loadAsync };
  }

  updateStateAfterAlloc(request: Request, blockIds: readonly number[], numExternalTokens: number): IssuedLoad | null {
    const first = this.matchStart.get(request.id) as number;
    const n = numExternalTokens / this.blockSize;
    const hashes = request.blockHashes.slice(first, first + n);
    const spec: TransferJobSpec = {
      jobId: this.nextJobId++,
      reqId: request.id,
      direction: 'cpuToGpu',
      gpuBlockIds: blockIds.slice(first, first + n),
      cpuBlockIds: hashes.map((h) => this.cpuByHash.get(h) as number),
      firstSubBlock: 0,
      fence: false,
    };
    this.issuedLoads.push(spec);
    this.loadsThisStep.push(spec);
    this.inFlight.add(spec.jobId);
    return { jobId: spec.jobId, firstBlockIndex: first, gpuBlockIds: spec.gpuBlockIds, blockHashes: hashes };
  }

  buildConnectorMeta(step: StepView): OffloadStepMetadata {
    const loads = this.loadsThisStep;
    this.loadsThisStep = [];
    return { flushReqIds: step.preemptedReqIds, stores: [], loads };
  }

  updateConnectorOutput(output: ModelRunnerOutput): void {
    for (const job of output.finishedJobs) {
      this.inFlight.delete(job.jobId);
      this.finishedJobIds.push(job.jobId);
    }
  }

  requestFinished(): boolean {
    return false;
  }

  hasPendingWork(): boolean {
    return this.inFlight.size > 0 || this.loadsThisStep.length > 0;
  }

  reset(): void {
    this.cpuByHash.clear();
    this.inFlight.clear();
    this.loadsThisStep = [];
  }

  loadsFor(reqId: string): TransferJobSpec[] {
    return this.issuedLoads.filter((l) => l.reqId === reqId);
  }
}

export interface HarnessOptions {
  readonly config?: Partial<SchedulerConfigInput>;
  readonly schedulerOptions?: Omit<SchedulerOptions, 'connector'>;
  /** Builds a connector over the harness's ranks. */
  readonly connector?: (ranks: SimulatedRanks) => SchedulerConnector;
  readonly numCpuBlocks?: number;
  readonly tp?: number;
  readonly loadLatencySteps?: PerRank<number>;
  readonly loadFaults?: LoadFaultInjector;
}

/**
 * A scheduler driven by the in-process engine loop (production rank workers
 * over simulated devices, and the aggregator), recording every step and every
 * request's tokens.
 */
export class Harness {
  readonly scheduler: Scheduler;
  readonly ranks: SimulatedRanks;
  readonly engine: SimulatedEngine;
  readonly connector: SchedulerConnector | null;
  readonly outputs = new Map<string, number[]>();
  readonly finishReasons = new Map<string, string>();
  readonly errors = new Map<string, string>();
  readonly steps: SchedulerOutput[] = [];
  readonly results: ModelRunnerOutput[] = [];
  readonly sketches = new Map<string, RequestSketch>();

  constructor(options: HarnessOptions = {}) {
    const config = tinyConfig(options.config);
    let clock = 0;
    const parts = assembleSimulatedEngine(
      kvGeometry({ model: TINY, tp: options.tp ?? 1, blockSize: config.blockSize }),
      { scheduler: config, cpuTier: null },
      {
        scheduler: { ...options.schedulerOptions, now: () => clock++ },
        ...(options.connector ? { customTier: { numCpuBlocks: options.numCpuBlocks ?? 256, connector: options.connector } } : {}),
      },
      { loadLatencySteps: options.loadLatencySteps ?? 1, loadFaults: options.loadFaults },
    );
    this.ranks = parts.ranks;
    this.connector = parts.connector;
    this.scheduler = parts.scheduler;
    this.engine = parts.engine;
  }

  add(id: string, sketch: RequestSketch): Request {
    const request = requestFor(this.scheduler, id, sketch);
    this.scheduler.addRequest(request);
    this.sketches.set(id, sketch);
    this.outputs.set(id, []);
    return request;
  }

  /** One engine step: schedule, run on the ranks, apply the merged output. */
  async step(): Promise<SimulatedStep> {
    const step = kept(await this.engine.step());
    this.record(step.scheduled, step.output, step.updates);
    return step;
  }

  /**
   * One step whose merged output is altered before the scheduler sees it
   * (e.g. to report what a faster rank would have reported already).
   */
  async stepWithOutput(alter: (output: ModelRunnerOutput) => ModelRunnerOutput): Promise<RequestUpdate[]> {
    const scheduled = this.scheduler.schedule();
    const output = alter(await this.ranks.execute(scheduled));
    const step = kept({ scheduled, output, updates: this.scheduler.updateFromOutput(scheduled, output) });
    this.record(step.scheduled, step.output, step.updates);
    return step.updates;
  }

  /** Steps until nothing is left to do; returns the number of steps taken. */
  async runUntilIdle(maxSteps = 10_000): Promise<number> {
    let n = 0;
    while (this.scheduler.hasPendingWork()) {
      if (n++ >= maxSteps) throw new Error(`still busy after ${maxSteps} steps`);
      await this.step();
    }
    return n;
  }

  /** Every rank is lost: the ranks restart on fresh devices and the scheduler drops what they held. */
  async loseRanks(): Promise<void> {
    await this.engine.loseRanks();
  }

  private record(scheduled: SchedulerOutput, output: ModelRunnerOutput, updates: readonly RequestUpdate[]): void {
    this.steps.push(scheduled);
    this.results.push(output);
    for (const u of updates) {
      this.outputs.get(u.reqId)?.push(...u.newTokenIds);
      if (u.finishReason !== undefined) this.finishReasons.set(u.reqId, u.finishReason);
      if (u.errorMessage !== undefined) this.errors.set(u.reqId, u.errorMessage);
    }
  }

  /** The step in which request `id` was scheduled last, or undefined. */
  scheduledIn(step: SchedulerOutput, id: string) {
    return step.requests.find((r) => r.reqId === id);
  }

  expectedTokens(id: string): number[] {
    return referenceTokens(this.sketches.get(id) as RequestSketch);
  }
}
