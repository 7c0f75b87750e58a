import { pathToFileURL } from 'node:url';
import { parseSchedulerConfig, type SchedulerConfig } from '../scheduler/config.js';
import type { SchedulerConnector } from '../scheduler/connector.js';
import type { JobResult, ModelRunnerOutput, SchedulerOutput, TransferJobSpec } from '../scheduler/outputs.js';
import { createRequest } from '../scheduler/request.js';
import { Scheduler } from '../scheduler/scheduler.js';

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
  /** Builds the connector to measure with (offloading on); none by default. */
  readonly connector?: (config: SchedulerConfig) => SchedulerConnector;
  /** Called once the scheduler exists, before the first step (e.g. to hand the connector the GPU prefix cache). */
  readonly onSchedulerCreated?: (scheduler: Scheduler) => void;
}

type ResolvedBenchOptions = Required<Omit<SchedulerBenchOptions, 'runningRequests' | 'connector' | 'onSchedulerCreated'>> &
  Pick<SchedulerBenchOptions, 'connector' | 'onSchedulerCreated'>;

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
 * finished at once. The token map is reused from step to step so the
 * stand-in adds next to no garbage of its own.
 */
class TrivialWorkers {
  private readonly vocabSize: number;
  private readonly sampledTokens = new Map<string, number>();

  constructor(vocabSize: number) {
    this.vocabSize = vocabSize;
  }

  run(so: SchedulerOutput): ModelRunnerOutput {
    const sampledTokens = this.sampledTokens;
    // Overwrites last step's entries in place (clearing would drop the map's table and regrow it every
    // step); only when some request is no longer sampled is the map rebuilt.
    let sampled = 0;
    for (let i = 0; i < so.requests.length; i++) {
      const r = so.requests[i];
      if (r.sample) {
        sampledTokens.set(r.reqId, (so.step * 7919 + i) % this.vocabSize);
        sampled++;
      }
    }
    if (sampledTokens.size !== sampled) {
      sampledTokens.clear();
      for (let i = 0; i < so.requests.length; i++) {
        const r = so.requests[i];
        if (r.sample) sampledTokens.set(r.reqId, (so.step * 7919 + i) % this.vocabSize);
      }
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

function measure(n: number, options: ResolvedBenchOptions): SchedulerBenchRow {
  const { steps, warmupSteps, promptTokens, blockSize, vocabSize } = options;
  const maxTokens = warmupSteps + steps + 8;
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
  const scheduler = new Scheduler(config, { connector: options.connector?.(config) ?? null });
  options.onSchedulerCreated?.(scheduler);
  for (let i = 0; i < n; i++) {
    const request = createRequest(
      { id: `bench-${i}`, promptTokens: benchPrompt(i, promptTokens, vocabSize), maxTokens, seed: i, arrivalTime: i },
      scheduler.requestLimits,
    );
    scheduler.addRequest(request);
  }
  const workers = new TrivialWorkers(vocabSize);
  const runStep = (): void => {
    const so = scheduler.schedule();
    scheduler.updateFromOutput(so, workers.run(so));
  };
  // Prefill every request, then warm up on decode steps.
  runStep();
  if (scheduler.stats().running !== n) {
    throw new Error(`bench setup: ${scheduler.stats().running} of ${n} requests running after prefill`);
  }
  for (let i = 0; i < warmupSteps; i++) runStep();

  // One CPU-time window over all timed steps (reading the CPU clock per call would cost more than it
  // measures); the stand-in workers' share, timed on the wall clock, is taken out of it.
  const wall: number[] = [];
  let scheduleNs = 0n;
  let totalNs = 0n;
  let workersNs = 0n;
  let tokens = 0;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < steps; i++) {
    const t0 = process.hrtime.bigint();
    const so = scheduler.schedule();
    const t1 = process.hrtime.bigint();
    const output = workers.run(so);
    const t2 = process.hrtime.bigint();
    scheduler.updateFromOutput(so, output);
    const t3 = process.hrtime.bigint();
    scheduleNs += t1 - t0;
    workersNs += t2 - t1;
    totalNs += t1 - t0 + (t3 - t2);
    wall.push(Number(t1 - t0 + (t3 - t2)) / 1000);
    tokens += so.totalScheduledTokens;
  }
  const cpu = process.cpuUsage(cpu0);
  const cpuUs = cpu.user + cpu.system - Number(workersNs) / 1000;
  if (scheduler.stats().running !== n) throw new Error('bench: a request stopped running during the timed steps');
  wall.sort((a, b) => a - b);
  const usPerStep = cpuUs / steps;
  return {
    runningRequests: n,
    steps,
    repeats: options.repeats,
    usPerStep,
    usPerRequestStep: usPerStep / n,
    wallUsPerStep: Number(totalNs) / 1000 / steps,
    p99WallUsPerStep: wall[Math.min(wall.length - 1, Math.floor(wall.length * 0.99))],
    scheduleShare: Number(scheduleNs) / Number(totalNs),
    tokensPerStep: tokens / steps,
    withConnector: options.connector !== undefined,
  };
}

export function runSchedulerBench(options: SchedulerBenchOptions = {}): SchedulerBenchRow[] {
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
  };
  const counts: Array<[string, number, number]> = [
    ['steps', resolved.steps, 1],
    ['repeats', resolved.repeats, 1],
    ['warmupSteps', resolved.warmupSteps, 0],
    ['promptTokens', resolved.promptTokens, 1],
    ['blockSize', resolved.blockSize, 1],
    ['vocabSize', resolved.vocabSize, 2],
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
  if (resolved.warmupRun && sizes.length > 0) measure(sizes[0], resolved);
  return sizes.map((n) => {
    const runs = Array.from({ length: resolved.repeats }, () => measure(n, resolved));
    runs.sort((a, b) => a.usPerStep - b.usPerStep);
    return runs[Math.floor(runs.length / 2)];
  });
}

export function formatSchedulerBench(rows: readonly SchedulerBenchRow[]): string {
  const lines = ['running  us/step(cpu)  us/req-step  wall us/step  p99 wall us  schedule share'];
  for (const r of rows) {
    lines.push(
      `${String(r.runningRequests).padStart(7)}  ${r.usPerStep.toFixed(1).padStart(12)}  ` +
        `${r.usPerRequestStep.toFixed(3).padStart(11)}  ${r.wallUsPerStep.toFixed(1).padStart(12)}  ` +
        `${r.p99WallUsPerStep.toFixed(1).padStart(11)}  ${(r.scheduleShare * 100).toFixed(0).padStart(13)}%`,
    );
  }
  return lines.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const json = process.argv.includes('--json');
  const rows = runSchedulerBench();
  console.log(json ? JSON.stringify(rows, null, 2) : formatSchedulerBench(rows));
}
