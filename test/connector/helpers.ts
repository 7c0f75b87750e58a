export { promptOf } from '../support/random.js';
import { tinyConfig } from '../scheduler/helpers.js';
import { blockHashes, type BlockHash } from '../../src/core/block-hash.js';
import { TINY } from '../support/tiny.js';
import { chainStates, referenceGenerate } from '../../src/model/reference.js';
import { OffloadingConnector } from '../../src/connector/scheduler-connector.js';
import { kvGeometry } from '../../src/core/kv-geometry.js';
import { assembleSimulatedEngine } from '../../src/sim/assemble-simulated.js';
import { offloadKeys } from '../../src/offload/geometry.js';
import { lruManager } from '../../src/offload/lru-manager.js';
import type { OffloadingManager, OffloadingManagerStats, PrepareStoreOutput, StoreAdmission } from '../../src/offload/manager.js';
import { StoreOnComputePolicy } from '../../src/offload/store-policies/on-compute.js';
import { offloadGeometry } from '../../src/offload/store-policies/store-policy.js';
import type { EvictionPolicyName } from '../../src/runtime/engine-types.js';
import type { SchedulerConfigInput } from '../../src/scheduler/config.js';
import type { SchedulerConnector, StepView } from '../../src/scheduler/connector-port.js';
import type { ModelRunnerOutput, SchedulerOutput, TransferJobSpec } from '../../src/protocol/step-protocol.js';
import { createRequest, type Request } from '../../src/scheduler/request.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import type { WorkerConnectorSwitches } from '../../src/connector/worker-connector-switches.js';
import { SimulatedEngine } from '../../src/sim/simulated-engine.js';
import { SimulatedRanks, type PerRank } from '../../src/sim/simulated-ranks.js';
import { kept } from '../support/kept-step.js';

export { TINY };


export interface RequestSketch {
  readonly prompt: readonly number[];
  readonly maxTokens: number;
  readonly seed?: number;
}

/** A request with the tiny model's limits, outside any scheduler (unit tests drive the connector directly). */
export function bareRequest(id: string, prompt: readonly number[], blockSize: number, maxTokens = 4): Request {
  return createRequest(
    { id, promptTokens: prompt, maxTokens, seed: 7 },
    { vocabSize: TINY.vocabSize, maxModelLen: 4096, blockSize },
  );
}

// ------------------------------------------------------------------ a scripted manager

/**
 * An LRU manager whose store answers a test can script: refuse the next
 * prepareStore calls (null, "no room"), or decline chosen keys the way an
 * admission filter does. Every offer is recorded.
 */
export class ScriptedManager implements OffloadingManager {
  readonly backing: ReturnType<typeof lruManager>;
  readonly storeOffers: BlockHash[][] = [];
  readonly lookups: BlockHash[][] = [];
  readonly touches: BlockHash[][] = [];
  /** Each refresh's chain, and the index of its first offered key. */
  readonly refreshes: { chain: BlockHash[]; firstOffered: number }[] = [];
  refusals = 0;
  declined = new Set<BlockHash>();

  constructor(capacityBlocks = 64) {
    this.backing = lruManager({ capacityBlocks });
  }

  lookup(keys: readonly BlockHash[]): number | null {
    this.lookups.push([...keys]);
    return this.backing.lookup(keys);
  }
  prepareLoad(keys: readonly BlockHash[]): number[] {
    return this.backing.prepareLoad(keys);
  }
  touch(keys: readonly BlockHash[]): void {
    this.touches.push([...keys]);
    this.backing.touch(keys);
  }
  refresh(keys: readonly BlockHash[], from: number, to: number): void {
    this.refreshes.push({ chain: keys.slice(0, to), firstOffered: from });
    this.backing.refresh(keys, from, to);
  }
  completeLoad(keys: readonly BlockHash[]): void {
    this.backing.completeLoad(keys);
  }
  prepareStore(keys: readonly BlockHash[], admit?: StoreAdmission): PrepareStoreOutput | null {
    this.storeOffers.push([...keys]);
    if (this.refusals > 0) {
      this.refusals--;
      return null;
    }
    return this.backing.prepareStore(keys, (key) => !this.declined.has(key) && (admit === undefined || admit(key)));
  }
  completeStore(keys: readonly BlockHash[], success: boolean): void {
    this.backing.completeStore(keys, success);
  }
  reset(): void {
    this.backing.reset();
  }
  stats(): OffloadingManagerStats {
    return this.backing.stats();
  }

  /** Puts `keys` in the tier, ready (their content is whatever the test writes to the runner). */
  hold(keys: readonly BlockHash[]): number[] {
    const out = this.backing.prepareStore(keys) as PrepareStoreOutput;
    this.backing.completeStore(out.keysToStore, true);
    return [...out.cpuBlockIds];
  }
}

/** A store-on-compute connector over a scripted manager, for unit tests without a scheduler. */
export function scriptedConnector(options: { blockSize?: number; offloadFactor?: number; capacityBlocks?: number } = {}) {
  const geometry = offloadGeometry(options.blockSize ?? 4, options.offloadFactor ?? 1);
  const manager = new ScriptedManager(options.capacityBlocks ?? 64);
  const connector = new OffloadingConnector({
    manager,
    policy: new StoreOnComputePolicy(geometry),
    geometry,
    bytesPerGpuBlock: 1,
  });
  return { connector, manager, geometry };
}

/** A step in which `request` computed `numTokens` more tokens over the table `blockIds`. */
export function computeStep(
  step: number,
  request: Request,
  blockIds: readonly number[],
  numTokens: number,
  preemptedReqIds: readonly string[] = [],
): StepView {
  // As in the scheduler: a request computing from its first token (new or resumed) is new to the workers.
  const fresh = request.numComputedTokens === 0;
  request.numComputedTokens += numTokens;
  return { step, scheduled: [{ request, blockIds, numScheduledTokens: numTokens, fresh }], preemptedReqIds };
}

/** Sequential GPU block ids from `first`. */
export function blockRange(first: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => first + i);
}

/** A merged worker output reporting the given jobs finished. */
export function jobsFinished(step: number, jobs: readonly TransferJobSpec[], ok = true): ModelRunnerOutput {
  return {
    step,
    sampledTokens: new Int32Array(0),
    finishedJobs: jobs.map((job) => ({
      jobId: job.jobId,
      direction: job.direction,
      ok,
      failedGpuBlockIds: ok || job.direction === 'gpuToCpu' ? [] : [...job.gpuBlockIds],
      bytes: 0,
      elapsedMs: 0,
    })),
    finishedSending: new Set(),
    finishedRecving: new Set(),
    invalidBlockIds: new Set(),
  };
}

// ------------------------------------------------------------------ end to end

export interface OffloadHarnessOptions {
  readonly scheduler?: Partial<SchedulerConfigInput>;
  readonly offloadFactor?: number;
  readonly cpuBlocks?: number;
  readonly eviction?: EvictionPolicyName;
  readonly storePolicy?: string;
  /** Tensor-parallel ranks (default 1). */
  readonly tp?: number;
  readonly loadLatencySteps?: PerRank<number>;
  readonly storeLatencySteps?: PerRank<number>;
  /** Worker-side switches that turn one reference behaviour off (sensitivity runs). */
  readonly switches?: WorkerConnectorSwitches;
  /** Wraps the connector the scheduler sees (e.g. to tamper with its metadata in a control run). */
  readonly wrapConnector?: (connector: OffloadingConnector) => SchedulerConnector;
  /** Wraps the CPU tier's manager the connector uses (e.g. to drop one kind of call in a control run). */
  readonly wrapManager?: (manager: OffloadingManager) => OffloadingManager;
}

/**
 * The real Scheduler and OffloadingConnector driven by the in-process engine
 * loop: production rank workers over simulated devices, which execute every
 * step's transfers and forward faithfully (a wrong or stale block shows up as
 * a wrong token), and the production aggregator.
 */
export class OffloadHarness {
  readonly scheduler: Scheduler;
  readonly ranks: SimulatedRanks;
  readonly engine: SimulatedEngine;
  readonly connector: OffloadingConnector;
  readonly manager: OffloadingManager;
  readonly outputs = new Map<string, number[]>();
  readonly finished = new Set<string>();
  readonly aborted = new Set<string>();
  readonly sketches = new Map<string, RequestSketch>();
  readonly steps: SchedulerOutput[] = [];
  readonly results: ModelRunnerOutput[] = [];

  constructor(options: OffloadHarnessOptions = {}) {
    const config = tinyConfig(options.scheduler);
    const geometry = kvGeometry({ model: TINY, tp: options.tp ?? 1, blockSize: config.blockSize, offloadFactor: options.offloadFactor });
    let clock = 0;
    const parts = assembleSimulatedEngine(
      geometry,
      {
        scheduler: config,
        cpuTier: { cpuBlocks: options.cpuBlocks ?? 64, eviction: options.eviction ?? 'lru', storePolicy: options.storePolicy ?? 'on-compute' },
      },
      {
        switches: { worker: options.switches },
        scheduler: { now: () => clock++ },
        hooks: { wrapManager: options.wrapManager, wrapConnector: options.wrapConnector },
      },
      { loadLatencySteps: options.loadLatencySteps ?? 1, storeLatencySteps: options.storeLatencySteps ?? 1 },
    );
    const offloading = parts.tiers.offloading!;
    this.connector = offloading.connector;
    this.manager = offloading.manager;
    this.ranks = parts.ranks;
    this.scheduler = parts.scheduler;
    this.engine = parts.engine;
  }

  add(id: string, sketch: RequestSketch): Request {
    const request = createRequest(
      { id, promptTokens: sketch.prompt, maxTokens: sketch.maxTokens, seed: sketch.seed ?? 7 },
      this.scheduler.requestLimits,
    );
    this.scheduler.addRequest(request);
    this.sketches.set(id, sketch);
    this.outputs.set(id, []);
    return request;
  }

  async step(): Promise<SchedulerOutput> {
    const { scheduled, output, updates } = kept(await this.engine.step());
    this.steps.push(scheduled);
    this.results.push(output);
    for (const update of updates) {
      this.outputs.get(update.reqId)?.push(...update.newTokenIds);
      if (update.finishReason !== undefined) this.finished.add(update.reqId);
    }
    return scheduled;
  }

  async runUntilIdle(maxSteps = 2_000): Promise<void> {
    for (let n = 0; this.scheduler.hasPendingWork(); n++) {
      if (n >= maxSteps) throw new Error(`still busy after ${maxSteps} steps`);
      await this.step();
    }
  }

  /** Runs one request alone to the end (stores included). */
  async serve(id: string, sketch: RequestSketch): Promise<void> {
    this.add(id, sketch);
    await this.runUntilIdle();
  }

  /** Drops every cached GPU block, so the next lookups must go to the CPU tier. */
  forgetGpuCache(): void {
    if (!this.scheduler.kvCacheManager.pool.resetPrefixCache()) throw new Error('GPU blocks are still held');
  }

  expectedTokens(id: string): number[] {
    const sketch = this.sketches.get(id) as RequestSketch;
    return referenceGenerate(TINY, { promptTokens: sketch.prompt, maxTokens: sketch.maxTokens, seed: sketch.seed ?? 7 })
      .outputTokens;
  }

  /** Aborts a request (its tokens so far must still be a prefix of the reference). */
  abort(id: string): boolean {
    this.aborted.add(id);
    return this.scheduler.abortRequest(id);
  }

  /** Requests whose tokens differ from the reference model's (for aborted ones: are not a prefix of them). */
  wrongOutputs(): string[] {
    return [...this.sketches.keys()].filter((id) => {
      const got = this.outputs.get(id) as number[];
      const want = this.expectedTokens(id);
      const lengthOk = this.aborted.has(id) ? got.length <= want.length : got.length === want.length;
      return !lengthOk || got.some((t, i) => t !== want[i]);
    });
  }

  /** Anything left behind once idle: held GPU blocks, pinned or half-stored CPU blocks, jobs. */
  async leaks(): Promise<string[]> {
    const problems = [...this.scheduler.kvCacheManager.pool.checkConsistency()];
    const usage = this.scheduler.stats().kvCache;
    if (usage.referenced !== 0) problems.push(`${usage.referenced} GPU blocks still held`);
    const tier = this.manager.stats();
    if (tier.pinnedBlocks !== 0) problems.push(`${tier.pinnedBlocks} CPU blocks still pinned`);
    if (tier.beingStoredBlocks !== 0) problems.push(`${tier.beingStoredBlocks} CPU blocks still being stored`);
    if (this.connector.hasPendingWork()) problems.push('connector still has jobs in flight');
    const onRanks = await this.ranks.pendingJobs();
    if (onRanks !== 0) problems.push(`${onRanks} jobs still on the ranks`);
    return problems;
  }

  /**
   * Every offloaded block the tier reports loadable, checked against the
   * reference KV of the token prefix it is keyed by. Returns the keys whose
   * CPU copy is wrong. (Uses lookup/prepareLoad, so run it at the end.)
   */
  wrongTierBlocks(): BlockHash[] {
    const f = this.connector.geometry.offloadFactor;
    const bs = this.ranks.blockSize;
    const expected = new Map<BlockHash, Uint32Array>();
    for (const [id, sketch] of this.sketches) {
      const tokens = [...sketch.prompt, ...(this.outputs.get(id) as number[])];
      const states = chainStates(TINY, tokens);
      const hashes = blockHashes(tokens, bs);
      for (let last = f - 1; last < hashes.length; last += f) {
        expected.set(hashes[last], states.slice((last - f + 1) * bs, (last + 1) * bs));
      }
    }
    const wrong: BlockHash[] = [];
    for (const [key, states] of expected) {
      if (this.manager.lookup([key]) !== 1) continue;
      const [cpuBlockId] = this.manager.prepareLoad([key]);
      this.manager.completeLoad([key]);
      // Every rank holds its heads of the same positions: each must hold the right states.
      const wrongOnSomeRank = this.ranks.devices.some((device) => device.cpu.readBlock(cpuBlockId).some((s, i) => s !== states[i]));
      if (wrongOnSomeRank) wrong.push(key);
    }
    return wrong;
  }

  /** Every load and store job sent to the workers so far. */
  loads(): TransferJobSpec[] {
    return this.steps.flatMap((s) => s.offload?.loads ?? []);
  }

  stores(): TransferJobSpec[] {
    return this.steps.flatMap((s) => s.offload?.stores ?? []);
  }

  /** Index of the step whose output reported job `jobId` finished, or -1. */
  stepFinishing(jobId: number): number {
    return this.results.findIndex((r) => r.finishedJobs.some((j) => j.jobId === jobId));
  }

  /** Index of the first step that computed tokens of request `id`, or -1. */
  firstStepScheduling(id: string): number {
    return this.steps.findIndex((s) => s.requests.some((r) => r.reqId === id));
  }
}

/** The offloaded-block keys of a token sequence. */
export function offloadedKeysOf(tokens: readonly number[], blockSize: number, offloadFactor: number): BlockHash[] {
  return offloadKeys(blockHashes(tokens, blockSize), offloadFactor);
}
