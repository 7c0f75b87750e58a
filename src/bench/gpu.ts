import { performance } from 'node:perf_hooks';
import type { BackendName, CopyMethod, KvLayout } from '../device/types.js';
import { MODEL_PRESETS, type ModelPresetName } from '../model/presets.js';
import { IntegrityChecker } from '../report/integrity.js';
import { buildRunReport, type RunReport } from '../report/report.js';
import { runConfiguration } from '../report/run-configuration.js';
import { Engine } from '../runtime/engine.js';
import type { FinishedRequest } from '../runtime/engine-types.js';
import { driveWorkload } from '../workload/drive.js';
import { MultiturnWorkload } from '../workload/multiturn.js';
import { runOverlapBench, type OverlapBenchRow } from './overlap.js';
import { runTransferBench, type TransferBenchRow } from './transfer.js';

/**
 * `kvtier bench gpu`: the GPU path's check in one command (under a minute on
 * one H100; the command prints how long it took): the transfer bench (kernel, dma, auto; one
 * direction and both; regions 1 KiB to 2 MiB), the overlap bench (small and
 * llama-8b, both layouts, 16 and 64 MiB jobs, under auto), a short offload
 * off / on comparison through the Engine with every output checked against
 * the reference model, 20 short runs of each bench with random job delays
 * (no completion may be lost), and each goal as met or not with its figure.
 *
 * On the host backend (or with `quick`) every part runs at small sizes: a
 * check that the path works end to end; its figures are the host's, not a
 * GPU's, and say nothing about the goals.
 */

export interface GpuBenchOptions {
  readonly backend: BackendName;
  /** Small sizes (always on the host backend). */
  readonly quick?: boolean;
  readonly deviceIndex?: number;
  /** One line per finished part. */
  readonly onProgress?: (line: string) => void;
}

/** One goal: met or not, with the figure it was judged on. */
export interface GpuGoal {
  readonly goal: string;
  readonly met: boolean;
  readonly figure: string;
}

/** An overlap row with the job size it ran with. */
export type GpuOverlapRow = OverlapBenchRow & { readonly jobMiB: number };

/** The comparison's figures for one run (offload off or on). */
export interface GpuCompareRun {
  readonly requests: number;
  readonly failed: number;
  readonly integrityChecked: number;
  readonly integrityMismatches: number;
  readonly ttftP50Ms: number | null;
  readonly ttftP99Ms: number | null;
  readonly wallSeconds: number;
  /** Prompt tokens the CPU tier served (0 with offload off). */
  readonly cpuHitTokens: number;
  /** Prompt tokens the forwards computed. */
  readonly prefillComputedTokens: number;
  /** Engine jobs' rate over their busy time, GB/s (null without jobs). */
  readonly storeGbps: number | null;
  readonly loadGbps: number | null;
}

export interface GpuCompare {
  readonly model: string;
  readonly offloadOff: GpuCompareRun;
  readonly offloadOn: GpuCompareRun;
}

export interface GpuBenchReport {
  readonly backend: BackendName;
  readonly quick: boolean;
  /** The figures are the host backend's: they do not measure a GPU. */
  readonly hostFigures: boolean;
  readonly transfer: readonly TransferBenchRow[];
  readonly overlap: readonly GpuOverlapRow[];
  /** Null when the comparison failed (its error is in `failures`). */
  readonly compare: GpuCompare | null;
  /** Consecutive runs of each bench with random job delays that all finished. */
  readonly stressRuns: StressRuns;
  /** Parts that stopped with an error, each named with it; the other parts still ran. */
  readonly failures: readonly string[];
  readonly goals: readonly GpuGoal[];
  readonly seconds: number;
}

/** Stress runs that finished, per bench. */
export interface StressRuns {
  readonly transfer: number;
  readonly overlap: number;
}

/** Runs of each bench in the stress part, and their random extra delay per job (ms). */
export const STRESS_RUNS = 20;
const STRESS_JITTER_MS = 1;

interface Sizes {
  readonly transferShapes: readonly { model: ModelPresetName; layout: KvLayout; blockTokens: number[] }[];
  readonly transferBytes: number;
  readonly transferRepeats: number;
  readonly overlapModels: readonly ModelPresetName[];
  readonly overlapJobMiB: readonly number[];
  readonly overlapBatch: number;
  readonly overlapContext: number;
  readonly overlapSteps: number;
  readonly overlapRounds: number;
  readonly compareModel: ModelPresetName;
  readonly compareGpuBlocks: number;
  readonly compareCpuBlocks: number;
  readonly compareRequests: number;
  readonly compareRounds: number;
  readonly compareUserTurnTokens: { readonly min: number; readonly max: number };
}

const MiB = 2 ** 20;

/**
 * On a GPU: regions of 1, 2, 4 and 16 KiB (tiny, cross-layer), 64 and
 * 256 KiB (llama-8b per-layer) and 2 MiB (llama-8b cross-layer), 64 MiB per
 * job; the overlap bench at batch 16, context 256, as measured before.
 */
const FULL: Sizes = {
  transferShapes: [
    { model: 'tiny', layout: 'cross-layer', blockTokens: [4, 8, 16, 64] },
    { model: 'llama-8b', layout: 'per-layer', blockTokens: [16, 64] },
    { model: 'llama-8b', layout: 'cross-layer', blockTokens: [16] },
  ],
  transferBytes: 64 * MiB,
  transferRepeats: 3,
  overlapModels: ['small', 'llama-8b'],
  overlapJobMiB: [16, 64],
  overlapBatch: 16,
  overlapContext: 256,
  overlapSteps: 6,
  overlapRounds: 2,
  compareModel: 'llama-8b',
  // 1 GiB of GPU blocks and an 8 GiB CPU tier (llama-8b: 2 MiB per 16-token block). 32 conversations of
  // 6 rounds grow to ~2k tokens each, several times the GPU pool, so a conversation thinking between rounds
  // loses its blocks and the CPU tier serves its next round (on the host backend, tiny at these block counts:
  // 57% of prompt tokens from the CPU tier, prefill computed 186k -> 51k tokens): the load path is exercised.
  compareGpuBlocks: 512,
  compareCpuBlocks: 4096,
  compareRequests: 192,
  compareRounds: 6,
  compareUserTurnTokens: { min: 128, max: 384 },
};

/** A check that every part runs: tiny shapes, a few blocks, a few requests. */
const QUICK: Sizes = {
  transferShapes: [{ model: 'tiny', layout: 'cross-layer', blockTokens: [4, 16] }],
  transferBytes: 256 * 1024,
  transferRepeats: 1,
  overlapModels: ['tiny'],
  overlapJobMiB: [1 / 16, 1 / 4],
  overlapBatch: 2,
  overlapContext: 16,
  overlapSteps: 1,
  overlapRounds: 1,
  compareModel: 'tiny',
  compareGpuBlocks: 48,
  compareCpuBlocks: 512,
  compareRequests: 12,
  compareRounds: 4,
  compareUserTurnTokens: { min: 32, max: 96 },
};

const TRANSFER_METHODS: readonly CopyMethod[] = ['kernel', 'dma', 'auto'];

export async function runGpuBench(options: GpuBenchOptions): Promise<GpuBenchReport> {
  const started = performance.now();
  const quick = options.quick === true || options.backend === 'host';
  const sizes = quick ? QUICK : FULL;
  const say = options.onProgress ?? (() => {});

  // A part that fails is reported with its error and the others still run:
  // one GPU session should say everything it can.
  const failures: string[] = [];
  const attempt = async <T>(part: string, run: () => Promise<T>): Promise<T | null> => {
    try {
      return await run();
    } catch (error) {
      const message = `${part}: ${(error as Error).message}`;
      failures.push(message);
      say(`failed: ${message}`);
      return null;
    }
  };

  const transfer: TransferBenchRow[] = [];
  for (const shape of sizes.transferShapes) {
    const part = `transfer ${shape.model} ${shape.layout} ${shape.blockTokens.join('/')} tokens`;
    const rows = await attempt(part, () => runTransferBench({
      backend: options.backend,
      deviceIndex: options.deviceIndex,
      models: [MODEL_PRESETS[shape.model]],
      layouts: [shape.layout],
      blockTokens: shape.blockTokens,
      totalBytes: sizes.transferBytes,
      repeats: sizes.transferRepeats,
      copyMethods: TRANSFER_METHODS,
    }));
    if (rows === null) continue;
    transfer.push(...rows);
    say(`${part}: ${rows.length} rows`);
  }

  const overlap: GpuOverlapRow[] = [];
  for (const jobMiB of sizes.overlapJobMiB) {
    const part = `overlap ${sizes.overlapModels.join('/')} with ${jobMiB} MiB jobs`;
    const rows = await attempt(part, () => runOverlapBench({
      backend: options.backend,
      deviceIndex: options.deviceIndex,
      models: sizes.overlapModels.map((m) => MODEL_PRESETS[m]),
      layouts: ['cross-layer', 'per-layer'],
      blockTokens: [16],
      copyMethods: ['auto'],
      batch: sizes.overlapBatch,
      contextTokens: sizes.overlapContext,
      stepsPerRound: sizes.overlapSteps,
      rounds: sizes.overlapRounds,
      jobBytes: Math.round(jobMiB * MiB),
    }));
    if (rows === null) continue;
    overlap.push(...rows.map((r) => ({ ...r, jobMiB })));
    say(`${part}: ${rows.length} rows`);
  }

  const stressRuns = await stress(options, failures);
  say(`stress: ${stressRuns.transfer} transfer and ${stressRuns.overlap} overlap runs with random job delays finished`);

  const compare = await attempt(`compare ${sizes.compareModel}`, () => compareOffload(options, sizes));
  if (compare !== null) {
    const on = compare.offloadOn;
    say(`compare ${compare.model}: integrity ${on.integrityChecked - on.integrityMismatches}/${on.integrityChecked} with offload`);
  }

  return {
    backend: options.backend,
    quick,
    hostFigures: options.backend === 'host',
    transfer,
    overlap,
    compare,
    stressRuns,
    failures,
    goals: judgeGoals({ transfer, overlap, compare, stressRuns, failures }),
    seconds: (performance.now() - started) / 1000,
  };
}

/**
 * Consecutive short runs of each bench with random per-job delays; a run
 * that throws (a job failed or went missing) is not counted and its error
 * goes to `failures`.
 */
async function stress(options: GpuBenchOptions, failures: string[]): Promise<StressRuns> {
  let transfer = 0;
  let overlap = 0;
  const counted = async (part: string, run: () => Promise<unknown>): Promise<number> => {
    try {
      await run();
      return 1;
    } catch (error) {
      failures.push(`${part}: ${(error as Error).message}`);
      return 0;
    }
  };
  for (let seed = 1; seed <= STRESS_RUNS; seed++) {
    const faults = { delayJitterMs: STRESS_JITTER_MS, seed };
    transfer += await counted(`stress transfer run ${seed}`, () => runTransferBench({
      backend: options.backend,
      deviceIndex: options.deviceIndex,
      models: [MODEL_PRESETS.tiny],
      layouts: ['per-layer'],
      blockTokens: [16],
      numBlocks: 64,
      repeats: 1,
      seed,
      copyMethods: [(['kernel', 'dma', 'auto'] as const)[seed % 3]],
      faults,
    }));
    overlap += await counted(`stress overlap run ${seed}`, () => runOverlapBench({
      backend: options.backend,
      deviceIndex: options.deviceIndex,
      models: [MODEL_PRESETS.tiny],
      layouts: ['cross-layer'],
      blockTokens: [16],
      transfers: ['both'],
      batch: 2,
      contextTokens: 16,
      stepsPerRound: 1,
      rounds: 1,
      jobBytes: 64 * 1024,
      faults,
    }));
  }
  return { transfer, overlap };
}

/** Offload off, then on, on one rank; every output checked against the reference model. */
async function compareOffload(options: GpuBenchOptions, sizes: Sizes): Promise<GpuCompare> {
  const run = async (offload: boolean): Promise<GpuCompareRun> => {
    const engine = await Engine.create({
      model: sizes.compareModel,
      tp: 1,
      backend: options.backend,
      blockSize: 16,
      gpuBlocks: sizes.compareGpuBlocks,
      offload,
      cpuBlocks: sizes.compareCpuBlocks,
    });
    const finished: FinishedRequest[] = [];
    const integrity = new IntegrityChecker(engine.config.model);
    let wallSeconds = 0;
    let report: RunReport;
    try {
      const workload = new MultiturnWorkload({
        vocabSize: engine.config.model.vocabSize,
        requests: sizes.compareRequests,
        rounds: sizes.compareRounds,
        systemPromptTokens: 256,
        userTurnTokens: sizes.compareUserTurnTokens,
        outputTokens: { min: 8, max: 24 },
        // Think times long enough that other conversations take a thinking one's GPU blocks.
        thinkTimeMs: { min: 50, max: 200 },
        conversationStaggerMs: 5,
      });
      const drive = await driveWorkload(engine, workload, (f) => {
        finished.push(f);
        integrity.add(f);
      });
      if (drive.stopped !== null) throw drive.stopped;
      wallSeconds = drive.wallSeconds;
    } finally {
      await engine.shutdown();
    }
    const summary = await integrity.finish();
    const metrics = engine.metrics();
    report = buildRunReport({
      finished,
      metrics,
      integrity: summary,
      wallSeconds,
      backend: engine.backend,
      tp: 1,
      offload,
      workload: 'gpu bench multiturn',
      configuration: runConfiguration(engine.config, engine.gpu, metrics.stepClock.description),
    });
    return {
      requests: report.requests.total,
      failed: report.requests.failed,
      integrityChecked: report.integrity.checked,
      integrityMismatches: report.integrity.mismatches,
      ttftP50Ms: report.latency.ttftMs.p50,
      ttftP99Ms: report.latency.ttftMs.p99,
      wallSeconds,
      cpuHitTokens: report.hits.cpuTierTokens,
      prefillComputedTokens: report.tokens.prefillComputed,
      storeGbps: report.transfers.gpuToCpu.gbps,
      loadGbps: report.transfers.cpuToGpu.gbps,
    };
  };
  const offloadOff = await run(false);
  const offloadOn = await run(true);
  return { model: sizes.compareModel, offloadOff, offloadOn };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** What the goals are judged on. */
export interface GpuFigures {
  readonly transfer: readonly TransferBenchRow[];
  readonly overlap: readonly GpuOverlapRow[];
  readonly compare: GpuCompare | null;
  readonly stressRuns: StressRuns;
  readonly failures: readonly string[];
}

/** The goals, each judged on this run's figures (same-run ratios); a goal without figures is not met. */
export function judgeGoals({ transfer, overlap, compare, stressRuns, failures }: GpuFigures): GpuGoal[] {
  const goals: GpuGoal[] = [];
  goals.push({
    goal: 'every part ran to the end',
    met: failures.length === 0,
    figure: failures.length === 0 ? 'all parts ran' : failures.join(' | '),
  });

  // Forward slowdown <= 3% with stores and loads each at >= 80% of the link, under auto.
  // Judged on the device-timed step where the device gives it: the wall time adds the JS thread's wake-up.
  const both = overlap.filter((r) => r.transfers === 'both');
  const stepSlowdown = (r: GpuOverlapRow) => r.deviceSlowdown ?? r.slowdown;
  const worstSlowdown = maxBy(both, stepSlowdown);
  const slowestCopies = minBy(both, (r) => Math.min(r.storeGbps, r.loadGbps) / r.limitGbps);
  const slowdownGoal = 'forward slowdown <= 3% with stores and loads each >= 80% of the link (auto, both directions)';
  if (!worstSlowdown || !slowestCopies) goals.push({ goal: slowdownGoal, met: false, figure: 'no overlap rows' });
  if (worstSlowdown && slowestCopies) {
    const rate = Math.min(slowestCopies.storeGbps, slowestCopies.loadGbps) / slowestCopies.limitGbps;
    goals.push({
      goal: slowdownGoal,
      met: stepSlowdown(worstSlowdown) <= 0.03 && rate >= 0.8,
      figure:
        `worst slowdown ${pct(stepSlowdown(worstSlowdown))} ${worstSlowdown.deviceSlowdown === null ? 'wall' : 'device'}-timed, ` +
        `${pct(worstSlowdown.slowdown)} wall (${describeOverlap(worstSlowdown)}); ` +
        `slowest copies ${pct(rate)} of the link (${describeOverlap(slowestCopies)})`,
    });
  }

  // Transfer ratios under auto: one way >= 0.90 and both ways >= 0.80 from 4 KiB; >= 0.70 at 1-2 KiB.
  const auto = transfer.filter((r) => r.copyMethod === 'auto');
  const judgeRatio = (goal: string, rows: TransferBenchRow[], floor: number) => {
    const worst = minBy(rows, (r) => r.ratio);
    if (!worst) {
      goals.push({ goal, met: false, figure: 'no transfer rows' });
      return;
    }
    goals.push({ goal, met: worst.ratio >= floor, figure: `lowest ${worst.ratio.toFixed(3)} (${describeTransfer(worst)})` });
  };
  judgeRatio(
    'transfer one way >= 0.90 of the contiguous copy, regions >= 4 KiB (auto)',
    auto.filter((r) => r.regionBytes >= 4096 && r.direction !== 'both'),
    0.9,
  );
  judgeRatio(
    'transfer both ways >= 0.80 of the contiguous copy, regions >= 4 KiB (auto)',
    auto.filter((r) => r.regionBytes >= 4096 && r.direction === 'both'),
    0.8,
  );
  judgeRatio('transfer >= 0.70 of the contiguous copy at 1-2 KiB regions (auto)', auto.filter((r) => r.regionBytes < 4096), 0.7);

  // Engine jobs at >= 80% of the link over their busy time, against the contiguous copy measured above.
  const link = Math.max(0, ...transfer.filter((r) => r.direction !== 'both').map((r) => r.limitGbps));
  if (compare === null) {
    goals.push({ goal: 'engine store and load jobs >= 80% of the link over their busy time', met: false, figure: 'the comparison failed' });
    goals.push({ goal: 'offload off/on comparison: every output matches the reference model', met: false, figure: 'the comparison failed' });
  } else {
    goals.push(...compareGoals(compare, link));
  }
  goals.push({
    goal: `no hang or lost completion in ${STRESS_RUNS} consecutive runs of each bench (random job delays)`,
    met: stressRuns.transfer === STRESS_RUNS && stressRuns.overlap === STRESS_RUNS,
    figure: `transfer ${stressRuns.transfer}/${STRESS_RUNS}, overlap ${stressRuns.overlap}/${STRESS_RUNS}`,
  });
  return goals;
}

function compareGoals(compare: GpuCompare, link: number): GpuGoal[] {
  const goals: GpuGoal[] = [];
  const on = compare.offloadOn;
  const engineGoal = `engine store and load jobs >= 80% of the link over their busy time (${compare.model})`;
  const idle = [on.storeGbps === null ? 'store' : null, on.loadGbps === null ? 'load' : null].filter((d) => d !== null);
  if (idle.length > 0) {
    // A direction without jobs says nothing about its rate: not met, and said so rather than shown as 0%.
    goals.push({ goal: engineGoal, met: false, figure: `no ${idle.join(' or ')} jobs ran with offload on` });
  } else {
    const engineRate = Math.min(on.storeGbps ?? 0, on.loadGbps ?? 0) / link;
    goals.push({
      goal: engineGoal,
      met: link > 0 && engineRate >= 0.8,
      figure: `stores ${fmtGbps(on.storeGbps)}, loads ${fmtGbps(on.loadGbps)} GB/s against ${link.toFixed(2)} GB/s (${pct(engineRate)})`,
    });
  }

  const runs = [compare.offloadOff, compare.offloadOn];
  goals.push({
    goal: `offload off/on comparison: every output matches the reference model (${compare.model})`,
    met: runs.every((r) => r.integrityMismatches === 0 && r.integrityChecked > 0 && r.failed === 0),
    figure:
      `off ${runs[0].integrityChecked - runs[0].integrityMismatches}/${runs[0].integrityChecked}, ` +
      `on ${runs[1].integrityChecked - runs[1].integrityMismatches}/${runs[1].integrityChecked}; ` +
      `TTFT p50 ${fmtMs(runs[0].ttftP50Ms)} -> ${fmtMs(runs[1].ttftP50Ms)} ms; ` +
      `prefill computed ${runs[0].prefillComputedTokens} -> ${runs[1].prefillComputedTokens} tokens, CPU tier served ${runs[1].cpuHitTokens}`,
  });
  return goals;
}

function describeOverlap(r: GpuOverlapRow): string {
  return `${r.model} ${r.layout} ${r.jobMiB} MiB jobs`;
}

function describeTransfer(r: TransferBenchRow): string {
  return `${r.model} ${r.layout} ${(r.regionBytes / 1024).toFixed(0)} KiB ${r.direction}`;
}

const fmtGbps = (x: number | null) => (x === null ? '-' : x.toFixed(2));
const fmtMs = (x: number | null) => (x === null ? '-' : x.toFixed(1));

function maxBy<T>(items: readonly T[], key: (item: T) => number): T | undefined {
  let best: T | undefined;
  for (const item of items) if (best === undefined || key(item) > key(best)) best = item;
  return best;
}

function minBy<T>(items: readonly T[], key: (item: T) => number): T | undefined {
  return maxBy(items, (item) => -key(item));
}
