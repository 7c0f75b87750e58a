import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { AllocationProbe } from './allocation-probe.js';
import { median } from './stats.js';
import { kvGeometry } from '../core/kv-geometry.js';
import type { EngineMonitor } from '../metrics/engine-monitor.js';
import { MODEL_PRESETS } from '../model/presets.js';
import { readGauges } from '../metrics/gauges.js';
import type { OffloadingManagerStats } from '../offload/manager.js';
import type { EngineMetrics } from '../runtime/engine-types.js';
import { createMetricsRegistry } from '../prometheus/metrics-registry.js';
import { parseSchedulerConfig, type SchedulerConfig } from '../scheduler/config.js';
import type { SchedulerConnector } from '../scheduler/connector-port.js';
import { NO_TOKEN, type JobResult, type ModelRunnerOutput, type RankStepOutput, type SchedulerOutput, type TransferJobSpec } from '../protocol/step-protocol.js';
import { createRequest } from '../scheduler/request.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import { assembleLocalEngine } from '../runtime/assembly/assemble-engine.js';
import type { CpuTierConfig } from '../runtime/assembly/tier-stack.js';
import { cacheTierMetrics } from '../runtime/cache-tier-metrics.js';

/**
 * Scheduler bench (docs/architecture.md, "Benchmarks"): CPU time of one schedule() +
 * updateFromOutput() step with N requests decoding. The "workers" are a
 * trivial stand-in that returns one token per sampled request (and reports
 * every transfer job finished at once), so only the scheduler is measured.
 */

export interface SchedulerBenchOptions {
  /** Running (decoding) request counts to measure. Default [256, 1024, 4096]. */
  readonly runningRequests?: readonly number[];
  /** Timed decode steps per request count. Default 500. */
  readonly steps?: number;
  /** Measurements per request count, each on a fresh scheduler; the row is the median one (by usPerStep). Default 3. */
  readonly repeats?: number;
  /** Untimed decode steps before timing (JIT warm-up). Default 100. */
  readonly warmupSteps?: number;
  /** Run the first size once untimed before measuring (JIT warm-up for the whole process). Default true. */
  readonly warmupRun?: boolean;
  /** Prompt length of every request. Default 128. */
  readonly promptTokens?: number;
  /** Default 16. */
  readonly blockSize?: number;
  readonly vocabSize?: number;
  /** The CPU tier to measure with, for each size's scheduler config (built by the engine's assembly); none by default. */
  readonly cpuTier?: (config: SchedulerConfig) => CpuTierConfig;
  /** A connector of the caller's own to measure with instead (no CPU tier then); none by default. */
  readonly connector?: (config: SchedulerConfig) => SchedulerConnector;
  /** Called once the scheduler exists, before the first step (e.g. to hand the connector the GPU prefix cache). */
  readonly onSchedulerCreated?: (scheduler: Scheduler) => void;
  /**
   * Also measure every size with the metrics attached, as the engine attaches
   * them: the monitor observes the scheduler and every step, and a Prometheus
   * registry over it is scraped every `scrapeEverySteps` steps. Off and on
   * measurements alternate, so drift hits both alike. Default false.
   */
  readonly withMetrics?: boolean;
  /**
   * Steps with metrics between scrapes. Default 1000: far more often than a
   * Prometheus server scrapes (every 15 s is common) even at these
   * scheduler-only step times of 0.1 to 5 ms.
   */
  readonly scrapeEverySteps?: number;
  /** Untimed steps after the timed ones whose heap allocation is read (allocBytesPerRequestStep). Default 64. */
  readonly allocationProbeSteps?: number;
}

type ResolvedBenchOptions = Required<
  Omit<SchedulerBenchOptions, 'runningRequests' | 'cpuTier' | 'connector' | 'onSchedulerCreated'>
> &
  Pick<SchedulerBenchOptions, 'cpuTier' | 'connector' | 'onSchedulerCreated'>;

export interface SchedulerBenchRow {
  readonly runningRequests: number;
  readonly steps: number;
  /** Measurements taken; this row is the median one. */
  readonly repeats: number;
  /**
   * Mean CPU microseconds (user + system, the whole process: JIT and GC
   * helper threads included) per schedule() + updateFromOutput().
   */
  readonly usPerStep: number;
  /** The same per running request. */
  readonly usPerRequestStep: number;
  /** Mean and 99th-percentile wall microseconds of the two calls. */
  readonly wallUsPerStep: number;
  readonly p99WallUsPerStep: number;
  /** Share of the wall time spent in schedule() (the rest is updateFromOutput()). */
  readonly scheduleShare: number;
  readonly tokensPerStep: number;
  readonly withConnector: boolean;
  /** Measured with the metrics monitor and a registry scraped every `scrapeEverySteps` steps. */
  readonly withMetrics: boolean;
  /** With metrics: usPerStep over the same size's row without them, minus 1; null without metrics. */
  readonly metricsOverhead: number | null;
  /**
   * With metrics: wall microseconds per timed step spent in the monitoring
   * itself (its step hooks and the scrapes, timed around each call), and that
   * time over the same size's usPerStep without metrics: a direct measure of
   * the cost that a loaded machine's noise does not swamp. null without metrics.
   */
  readonly monitoringUsPerStep: number | null;
  readonly monitoringShare: number | null;
  /**
   * Heap bytes that schedule() + updateFromOutput() allocate per running
   * request in a decode step that completes no block (the median over the
   * untimed probe steps after the timed ones, steps with a garbage
   * collection left out); null when no probed step qualified.
   */
  readonly allocBytesPerRequestStep: number | null;
}

/** Token stream of request `index`: distinct prompts, so there are no prefix hits to skew the figure. */
function benchPrompt(index: number, length: number, vocabSize: number): Int32Array {
  const tokens = new Int32Array(length);
  let x = (index * 2654435761 + 1) >>> 0;
  for (let i = 0; i < length; i++) {
    x = (Math.imul(x ^ (x >>> 13), 0x5bd1e995) + i) >>> 0;
    tokens[i] = x % vocabSize;
  }
  return tokens;
}

/**
 * The trivial workers: one token per sampled request, every transfer job
 * finished at once. The token array is reused from step to step (a new one
 * only when the batch size changes) so the stand-in adds next to no garbage
 * of its own.
 */
class TrivialWorkers {
  private readonly vocabSize: number;
  private sampledTokens = new Int32Array(0);

  constructor(vocabSize: number) {
    this.vocabSize = vocabSize;
  }

  run(so: SchedulerOutput): ModelRunnerOutput {
    if (this.sampledTokens.length !== so.requests.length) this.sampledTokens = new Int32Array(so.requests.length);
    const sampledTokens = this.sampledTokens;
    for (let i = 0; i < so.requests.length; i++) {
      sampledTokens[i] = so.requests[i].sample ? (so.step * 7919 + i) % this.vocabSize : NO_TOKEN;
    }
    const finishedJobs: JobResult[] = [];
    let finishedRecving = EMPTY;
    if (so.offload !== null) {
      for (const job of so.offload.stores) finishedJobs.push(finishedJob(job));
      if (so.offload.loads.length > 0) finishedRecving = new Set();
      for (const job of so.offload.loads) {
        finishedJobs.push(finishedJob(job));
        if (job.reqId !== null) finishedRecving.add(job.reqId);
      }
    }
    return { step: so.step, sampledTokens, finishedJobs, finishedSending: EMPTY, finishedRecving, invalidBlockIds: NO_BLOCKS };
  }
}

function finishedJob(job: TransferJobSpec): JobResult {
  return { jobId: job.jobId, direction: job.direction, ok: true, failedGpuBlockIds: NO_IDS, bytes: 0, elapsedMs: 0 };
}

const EMPTY: Set<string> = new Set();
const NO_IDS: readonly number[] = Object.freeze([]);
const NO_BLOCKS: ReadonlySet<number> = new Set();

/**
 * The engine's monitoring around a bare scheduler: what Engine.step() adds
 * per step (two clock reads, the monitor's step hooks over one stand-in
 * rank's output) and a registry reading the same gauges an engine's does.
 */
class BenchMonitoring {
  readonly registry: Registry;
  private readonly rankOutput: { -readonly [K in keyof RankStepOutput]: RankStepOutput[K] } = {
    rank: 0,
    step: 0,
    sampledReqIds: [],
    digests: [],
    connector: { finishedJobs: [], finishedSending: [], finishedRecving: [], invalidBlockIds: [] },
    stepMs: 0,
    forwardMs: 0,
    injectedLoadFailures: 0,
  };
  private readonly outputs: RankStepOutput[] = [this.rankOutput];
  private started = 0;
  /** Wall milliseconds spent in the hooks and scrapes since it was last set to 0. */
  ownMs = 0;

  constructor(
    readonly monitor: EngineMonitor,
    scheduler: Scheduler,
    cpuTierStats: () => OffloadingManagerStats | null,
  ) {
    this.registry = createMetricsRegistry({
      metrics: () => benchMetrics(scheduler),
      monitoring: () => ({
        monitor,
        gauges: readGauges({
          scheduler: scheduler.stats(),
          gpuEvictedBlocks: scheduler.kvCacheManager.pool.evictedBlocks,
          cpuTier: cpuTierStats(),
          monitor,
          ranksAlive: [true],
        }),
      }),
    });
  }

  stepStarted(so: SchedulerOutput): void {
    const t0 = performance.now();
    this.started = t0;
    this.monitor.stepScheduled(so);
    this.ownMs += performance.now() - t0;
  }

  stepAnswered(so: SchedulerOutput, output: ModelRunnerOutput): void {
    const t0 = performance.now();
    const rank = this.rankOutput;
    rank.step = so.step;
    // A rank measures its step time anyway; the stand-in takes it from the clock read that times this call.
    rank.stepMs = t0 - this.started;
    (rank.connector as { finishedJobs: readonly JobResult[] }).finishedJobs = output.finishedJobs;
    this.monitor.stepAnswered(this.outputs, output.finishedJobs);
    this.ownMs += performance.now() - t0;
  }

  stepFinished(): void {
    const t0 = performance.now();
    this.monitor.stepFinished(t0 - this.started);
    this.ownMs += performance.now() - t0;
  }

  async scrape(): Promise<void> {
    const t0 = performance.now();
    await this.registry.metrics();
    this.ownMs += performance.now() - t0;
  }
}

/** EngineMetrics of a bare scheduler (no ranks: transfers and leaks are not tracked here). */
function benchMetrics(scheduler: Scheduler): EngineMetrics {
  const s = scheduler.stats();
  const none = { jobs: 0, failedJobs: 0, bytes: 0, busyMs: 0, copyJobs: 0 };
  return {
    steps: s.steps,
    preemptions: s.preemptions,
    requests: { added: s.requestsAdded, finished: s.requestsFinished, aborted: s.requestsAborted, failed: s.requestsFailed },
    tokens: { prompt: 0, output: s.outputTokens, prefillComputed: s.prefillTokensComputed, recomputed: s.recomputedTokens, promptReached: s.promptTokensReached },
    ...cacheTierMetrics(s),
    transfers: { gpuToCpu: none, cpuToGpu: none },
    loadFailures: { blocks: s.loadFailures.blocks, requestsRecovered: s.loadFailures.requestsRecovered },
    storeFailures: 0,
    rankRestarts: 0,
    leaks: { gpuBlocks: 0, cpuBlocks: 0 },
    stepClock: { description: 'none (scheduler only)', modelledComputeMs: 0, forwardMs: 0 },
  };
}

/** Timings of the steps run in one mode (with or without metrics). */
class ModeTimings {
  readonly wall: number[] = [];
  scheduleNs = 0n;
  totalNs = 0n;
  workersNs = 0n;
  tokens = 0;
  cpuUs = 0;
  steps = 0;
}

/**
 * Measures one fresh scheduler at `n` running requests. With metrics, the
 * timed steps alternate between blocks without and blocks with the
 * monitoring (`steps` of each), so a busy machine's swings hit both modes
 * alike; a block is two block-sizes of steps, so both see the same share of
 * the steps where every request completes a block. Returns the row without
 * metrics, then (with metrics) the row with them.
 */
async function measure(n: number, options: ResolvedBenchOptions, withMetrics: boolean): Promise<SchedulerBenchRow[]> {
  const { steps, warmupSteps, promptTokens, blockSize, vocabSize } = options;
  const timedSteps = withMetrics ? 2 * steps : steps;
  const maxTokens = warmupSteps + timedSteps + options.allocationProbeSteps + 8;
  const maxModelLen = promptTokens + maxTokens;
  const blocksPerRequest = Math.ceil(maxModelLen / blockSize);
  const config = parseSchedulerConfig({
    blockSize,
    numGpuBlocks: n * blocksPerRequest + 16,
    maxNumBatchedTokens: n * promptTokens,
    maxNumSeqs: n,
    maxModelLen,
    vocabSize,
  });
  const { connector } = options;
  const parts = assembleLocalEngine(
    kvGeometry({ model: { ...MODEL_PRESETS.tiny, vocabSize }, tp: 1, blockSize }),
    { scheduler: config, cpuTier: options.cpuTier?.(config) ?? null, remote: null, device: { backend: 'host' } },
    {
      // Without metrics nothing observes the scheduler; with them the assembly's monitor does, as in the engine.
      scheduler: withMetrics ? {} : { observer: null },
      ...(connector ? { customTier: { numCpuBlocks: 0, connector: () => connector(config) } } : {}),
    },
    { start: () => new TrivialWorkers(vocabSize) },
  );
  const { scheduler, ranks: workers } = parts;
  const cpuTier = parts.tiers.offloading?.manager ?? null;
  const monitoring = withMetrics ? new BenchMonitoring(parts.monitor, scheduler, () => cpuTier?.stats() ?? null) : null;
  options.onSchedulerCreated?.(scheduler);
  for (let i = 0; i < n; i++) {
    const request = createRequest(
      { id: `bench-${i}`, promptTokens: benchPrompt(i, promptTokens, vocabSize), maxTokens, seed: i, arrivalTime: i },
      scheduler.requestLimits,
    );
    scheduler.addRequest(request);
  }
  const runStep = (): void => {
    const so = scheduler.schedule();
    monitoring?.stepStarted(so);
    const output = workers.run(so);
    monitoring?.stepAnswered(so, output);
    scheduler.updateFromOutput(so, output);
    monitoring?.stepFinished();
  };
  // Prefill every request, then warm up on decode steps.
  runStep();
  if (scheduler.stats().running !== n) {
    throw new Error(`bench setup: ${scheduler.stats().running} of ${n} requests running after prefill`);
  }
  for (let i = 0; i < warmupSteps; i++) runStep();

  // CPU time is read once per block of steps (reading the CPU clock per call would cost more than it
  // measures); the stand-in workers' share, timed on the wall clock, is taken out of it.
  const modes = [new ModeTimings(), new ModeTimings()];
  const blockLength = withMetrics ? 2 * blockSize : timedSteps;
  const scrapeEvery = options.scrapeEverySteps;
  let scrapes = 0;
  if (monitoring !== null) monitoring.ownMs = 0;
  let cpuMark = process.cpuUsage();
  let previous = modes[0];
  for (let i = 0; i < timedSteps; i++) {
    // Pairs of blocks, one of each mode, in a pseudo-random order per pair: the steps' own cost varies
    // with their position (every other block costs more here), which a fixed order would book to one mode.
    // Once one mode has its `steps`, the other finishes its own.
    const block = Math.floor(i / blockLength);
    const onFirst = (Math.imul((block >>> 1) + 1, 0x9e3779b1) >>> 16) % 2 === 1;
    const onHere = (block % 2 === 0) === onFirst;
    const on = withMetrics && (modes[0].steps >= steps || (modes[1].steps < steps && onHere));
    const mode = modes[on ? 1 : 0];
    if (mode !== previous) {
      const cpu = process.cpuUsage(cpuMark);
      cpuMark = process.cpuUsage();
      previous.cpuUs += cpu.user + cpu.system;
      previous = mode;
    }
    const active = on ? monitoring : null;
    const t0 = process.hrtime.bigint();
    const so = scheduler.schedule();
    active?.stepStarted(so);
    const t1 = process.hrtime.bigint();
    const output = workers.run(so);
    const t2 = process.hrtime.bigint();
    active?.stepAnswered(so, output);
    scheduler.updateFromOutput(so, output);
    active?.stepFinished();
    const t3 = process.hrtime.bigint();
    mode.steps++;
    // A scrape is served between steps, as the CLI's endpoint is; its CPU time counts, its wall time is not a step's.
    if (active !== null && mode.steps % scrapeEvery === 0) {
      await active.scrape();
      scrapes++;
    }
    mode.scheduleNs += t1 - t0;
    mode.workersNs += t2 - t1;
    mode.totalNs += t1 - t0 + (t3 - t2);
    mode.wall.push(Number(t1 - t0 + (t3 - t2)) / 1000);
    mode.tokens += so.totalScheduledTokens;
  }
  const cpu = process.cpuUsage(cpuMark);
  previous.cpuUs += cpu.user + cpu.system;
  const allocBytesPerRequestStep = probeAllocation(scheduler, workers, options.allocationProbeSteps, blockSize, n);
  if (scheduler.stats().running !== n) throw new Error('bench: a request stopped running during the timed steps');
  if (monitoring !== null && monitoring.monitor.stepTime.count !== 1 + warmupSteps + modes[1].steps) {
    throw new Error('bench: the monitor missed steps');
  }
  if (monitoring !== null && scrapes !== Math.floor(modes[1].steps / scrapeEvery)) throw new Error('bench: scrapes were skipped');
  const row = (mode: ModeTimings, metrics: boolean): SchedulerBenchRow => {
    mode.wall.sort((a, b) => a - b);
    const usPerStep = (mode.cpuUs - Number(mode.workersNs) / 1000) / mode.steps;
    return {
      runningRequests: n,
      steps: mode.steps,
      repeats: options.repeats,
      usPerStep,
      usPerRequestStep: usPerStep / n,
      wallUsPerStep: Number(mode.totalNs) / 1000 / mode.steps,
      p99WallUsPerStep: mode.wall[Math.min(mode.wall.length - 1, Math.floor(mode.wall.length * 0.99))],
      scheduleShare: Number(mode.scheduleNs) / Number(mode.totalNs),
      tokensPerStep: mode.tokens / mode.steps,
      withConnector: options.connector !== undefined || options.cpuTier !== undefined,
      withMetrics: metrics,
      metricsOverhead: null,
      monitoringUsPerStep: metrics && monitoring !== null ? (monitoring.ownMs * 1000) / mode.steps : null,
      monitoringShare: null,
      allocBytesPerRequestStep,
    };
  };
  if (!withMetrics) return [row(modes[0], false)];
  const off = row(modes[0], false);
  const on = row(modes[1], true);
  return [
    off,
    {
      ...on,
      metricsOverhead: on.usPerStep / off.usPerStep - 1,
      monitoringShare: (on.monitoringUsPerStep as number) / off.usPerStep,
    },
  ];
}

/**
 * Heap bytes per request that the scheduler's two calls allocate in the
 * probed steps that complete no block (see SchedulerBenchRow); the stand-in
 * workers' own allocation is outside the measured calls.
 */
function probeAllocation(scheduler: Scheduler, workers: TrivialWorkers, steps: number, blockSize: number, n: number): number | null {
  if (steps === 0) return null;
  const probe = new AllocationProbe();
  const quiet: number[] = [];
  for (let i = 0; i < steps; i++) {
    let so: SchedulerOutput | null = null;
    const scheduled = probe.measure(() => {
      so = scheduler.schedule();
    });
    const step = so as unknown as SchedulerOutput;
    const output = workers.run(step);
    const updated = probe.measure(() => {
      scheduler.updateFromOutput(step, output);
    });
    if (scheduled === null || updated === null) continue;
    if (step.requests.some((r) => (r.startPosition + r.tokens.length) % blockSize === 0)) continue;
    quiet.push((scheduled + updated) / n);
  }
  return quiet.length === 0 ? null : median(quiet);
}

function medianBy(runs: SchedulerBenchRow[][], key: (pair: SchedulerBenchRow[]) => number): SchedulerBenchRow[] {
  const sorted = [...runs].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor(sorted.length / 2)];
}

export async function runSchedulerBench(options: SchedulerBenchOptions = {}): Promise<SchedulerBenchRow[]> {
  const sizes = options.runningRequests ?? [256, 1024, 4096];
  const resolved = {
    steps: options.steps ?? 500,
    repeats: options.repeats ?? 3,
    warmupSteps: options.warmupSteps ?? 100,
    warmupRun: options.warmupRun ?? true,
    promptTokens: options.promptTokens ?? 128,
    blockSize: options.blockSize ?? 16,
    vocabSize: options.vocabSize ?? 32000,
    connector: options.connector,
    onSchedulerCreated: options.onSchedulerCreated,
    withMetrics: options.withMetrics ?? false,
    scrapeEverySteps: options.scrapeEverySteps ?? 1000,
    cpuTier: options.cpuTier,
    allocationProbeSteps: options.allocationProbeSteps ?? 64,
  };
  const counts: Array<[string, number, number]> = [
    ['steps', resolved.steps, 1],
    ['repeats', resolved.repeats, 1],
    ['warmupSteps', resolved.warmupSteps, 0],
    ['promptTokens', resolved.promptTokens, 1],
    ['blockSize', resolved.blockSize, 1],
    ['vocabSize', resolved.vocabSize, 2],
    ['scrapeEverySteps', resolved.scrapeEverySteps, 1],
    ['allocationProbeSteps', resolved.allocationProbeSteps, 0],
  ];
  for (const [name, value, min] of counts) {
    if (!Number.isInteger(value) || value < min) {
      throw new RangeError(`scheduler bench: ${name} must be an integer >= ${min}, got ${value}`);
    }
  }
  for (const n of sizes) {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`scheduler bench: runningRequests entry ${n} is not a positive integer`);
  }
  // One untimed pass at the first size first: the optimizing compiler's background threads would
  // otherwise count in the first row's CPU time.
  if (resolved.warmupRun && sizes.length > 0) await measure(sizes[0], resolved, resolved.withMetrics);
  const rows: SchedulerBenchRow[] = [];
  for (const n of sizes) {
    const runs: SchedulerBenchRow[][] = [];
    for (let r = 0; r < resolved.repeats; r++) runs.push(await measure(n, resolved, resolved.withMetrics));
    // The median run: by the overhead with metrics (each run pairs both modes), by usPerStep without.
    rows.push(...medianBy(runs, (pair) => (pair.length > 1 ? (pair[1].metricsOverhead as number) : pair[0].usPerStep)));
  }
  return rows;
}
