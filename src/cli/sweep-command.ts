import { Command } from 'commander';
import type { z } from 'zod';
import { runSweep, parseSweepPolicy, type SweepPoint, type SweepPolicy, type SweepResult } from '../bench/sweep.js';
import { ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { cpuBytesCapacity, cpuBytesIssue } from '../config/engine-rules.js';
import { describeConfigIssue, invalidSetting, type SettingNaming } from '../config/issues.js';
import { MAX_CPU_BLOCKS } from '../config/limits.js';
import { KvtierError } from '../core/errors.js';
import { isModelPresetName, MODEL_PRESETS, MODEL_PRESET_NAMES, type ModelPresetName } from '../model/presets.js';
import { DEFAULT_TIMED_MODEL } from '../bench/replay-clock.js';
import { DEFAULT_GPU_PROFILE, GPU_PROFILE_NAMES, gpuProfile, isGpuProfileName, type GpuProfileName } from '../timing/gpu-profiles.js';
import { EVICTION_POLICY_NAMES } from '../config/eviction-policy-names.js';
import { sweepHitsSvg, sweepPaceLines, sweepReportHtml } from '../bench/sweep-report.js';
import { parseByteSize } from '../core/byte-size.js';
import { engineSetting, positiveInt } from './field-schemas.js';
import { checkOutputFile, checkOutputsApart, writeJsonFile, writeTextFile } from './output-file.js';
import { RUN_DEFAULTS } from './run-defaults.js';
import { UsageError } from './usage-error.js';
import { ERROR_CODES } from '../core/error-codes.js';
import { POOL_DEFAULTS } from '../config/pool-defaults.js';

/**
 * `kvtier sweep`: one trace slice over a grid of CPU-tier capacities and
 * policies, each point against the CPU tier's bound at its capacity and the
 * unbounded tier's ceiling (with the GPU+CPU optimum for reference); a table,
 * and optionally JSON and a self-contained HTML report.
 */

export const SWEEP_DEFAULTS = {
  cpuBlocks: POOL_DEFAULTS.sweep.cpuBlocks,
  policies: [...EVICTION_POLICY_NAMES],
  maxRequests: 1000,
  tokenScale: 16,
  gpuBlocks: POOL_DEFAULTS.sweep.gpuBlocks,
  blockSize: ENGINE_DEFAULTS.blockSize,
  offloadFactor: ENGINE_DEFAULTS.offloadFactor,
  speedup: 20,
  tp: RUN_DEFAULTS.hostTp,
} as const;

export function createSweepCommand(): Command {
  return new Command('sweep')
    .description(
      'replay one trace slice over a grid of CPU-tier capacities and policies; per point CPU-tier and GPU-prefix hit tokens, ' +
        'prefill tokens computed, the CPU tier\'s bound at that capacity (Belady over what the tier sees behind the GPU tier) and ' +
        'its share of it, the unbounded tier\'s ceiling, and the GPU+CPU optimum of kvtier analyze (simulated ranks unless --engine)',
    )
    .requiredOption('--trace <file>', 'Mooncake trace (JSONL)')
    .option('--cpu-blocks <list>', `CPU tier capacities in offloaded blocks (default ${SWEEP_DEFAULTS.cpuBlocks.join(',')})`)
    .option('--cpu-bytes <list>', 'CPU tier capacities in bytes over all ranks (e.g. 64MiB,256MiB), converted with --model\'s KV size')
    .option('--model <name>', `the model the replay's step clock times and --cpu-bytes sizes blocks by: ${MODEL_PRESET_NAMES.join(' | ')} (default ${DEFAULT_TIMED_MODEL})`)
    .option('--gpu <profile>', `the GPU the step clock and host link model: ${GPU_PROFILE_NAMES.join(' | ')} (default ${DEFAULT_GPU_PROFILE})`)
    .option('--policies <list>', `policies: ${EVICTION_POLICY_NAMES.join(', ')}, reuse:K, or EVICTION/STORE e.g. s3fifo/on-evict (default ${SWEEP_DEFAULTS.policies.join(',')})`)
    .option('--max-requests <n>', `requests from the start of the trace (default ${SWEEP_DEFAULTS.maxRequests})`)
    .option('--token-scale <n>', `divide lengths and the 512-token trace block by N (default ${SWEEP_DEFAULTS.tokenScale})`)
    .option('--gpu-blocks <n>', `GPU KV blocks (default ${SWEEP_DEFAULTS.gpuBlocks})`)
    .option('--block-size <tokens>', `tokens per GPU block (default ${SWEEP_DEFAULTS.blockSize})`)
    .option('--offload-factor <n>', `GPU blocks per offloaded block (default ${SWEEP_DEFAULTS.offloadFactor})`)
    .option('--step-ms <ms>', 'simulated replay: a fixed number of trace milliseconds per engine step instead of the modelled step clock (transfers then take one step)')
    .option('--engine', 'run the full engine per point (host backend; adds TTFT) instead of the simulated replay')
    .option('--speedup <x>', `with --engine: arrivals this many times faster than the trace (default ${SWEEP_DEFAULTS.speedup})`)
    .option('--tp <n>', `with --engine: tensor-parallel ranks (default ${SWEEP_DEFAULTS.tp})`)
    .option('--json <file>', 'also write the sweep as JSON')
    .option('--html <file>', 'also write a self-contained HTML report with charts')
    .option('--svg <file>', 'also write the hits-against-capacity chart alone as an SVG image')
    .allowExcessArguments(false);
}

export interface SweepCommandOptions {
  readonly trace: string;
  readonly cpuBlocks: readonly number[];
  readonly policies: readonly SweepPolicy[];
  readonly maxRequests: number;
  readonly tokenScale: number;
  readonly gpuBlocks: number;
  readonly blockSize: number;
  readonly offloadFactor: number;
  readonly engine: { readonly backend: 'host'; readonly tp: number; readonly speedup: number; readonly gpu: GpuProfileName } | null;
  /** Simulated replay: a fixed trace milliseconds per engine step, or null for the modelled clock. */
  readonly traceMsPerStep: number | null;
  /** The model the step clock times (and --cpu-bytes sizes blocks by). */
  readonly model: ModelPresetName;
  readonly gpu: GpuProfileName;
  readonly json: string | null;
  readonly html: string | null;
  readonly svg: string | null;
}

interface RawSweepFlags {
  trace?: string;
  cpuBlocks?: string;
  cpuBytes?: string;
  model?: string;
  policies?: string;
  maxRequests?: string;
  tokenScale?: string;
  gpuBlocks?: string;
  blockSize?: string;
  offloadFactor?: string;
  engine?: boolean;
  gpu?: string;
  speedup?: string;
  stepMs?: string;
  tp?: string;
  json?: string;
  html?: string;
  svg?: string;
}

/** An error naming `flag` and the value it got, in the one wording of config errors (src/config/issues.ts). */
function flagError(flag: string, value: string, message: string): UsageError {
  const naming: SettingNaming = { where: () => flag, shown: () => JSON.stringify(value), unknownKey: () => `unknown option ${flag}` };
  return new UsageError(describeConfigIssue(invalidSetting(flag, message), naming));
}

/** A flag's value checked by a field schema (an engine setting's own, or a CLI one). */
function flagValue<T>(flag: string, text: string | undefined, field: z.ZodType<T>, fallback: T): T {
  if (text === undefined) return fallback;
  const parsed = field.safeParse(text);
  if (!parsed.success) throw flagError(flag, text, parsed.error.issues[0].message);
  return parsed.data;
}

function positiveIntFlag(flag: string, text: string | undefined, fallback: number): number {
  return flagValue(flag, text, positiveInt(), fallback);
}

/** A flag's number > 0 (not only integers), or `fallback` when it is absent. */
function positiveNumberFlag(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value <= 0) throw flagError(flag, text, 'expected a number > 0');
  return value;
}

function listOf(flag: string, text: string): string[] {
  const items = text.split(',').map((item) => item.trim());
  if (items.some((item) => item === '')) throw flagError(flag, text, 'expected a comma-separated list with no empty items');
  return items;
}

function capacities(flags: RawSweepFlags, blockSize: number, offloadFactor: number): number[] {
  if (flags.cpuBlocks !== undefined && flags.cpuBytes !== undefined) {
    throw new UsageError('--cpu-blocks and --cpu-bytes both size the CPU tier; give one');
  }
  let blocks: number[];
  if (flags.cpuBytes !== undefined) {
    const model = modelFlag(flags);
    const shape = MODEL_PRESETS[model];
    blocks = listOf('--cpu-bytes', flags.cpuBytes).map((item) => {
      const bytes = parseByteSize(item);
      if (bytes === null) throw flagError('--cpu-bytes', item, 'expected a size such as 64MiB or 2GB');
      // The engine's rule: at least one offloaded block, at most its limit.
      const issue = cpuBytesIssue(shape, blockSize, offloadFactor, bytes);
      if (issue?.kind === 'invalid') throw flagError('--cpu-bytes', item, `${issue.message} (--model ${model})`);
      return cpuBytesCapacity(shape, blockSize, offloadFactor, bytes).blocks;
    });
  } else if (flags.cpuBlocks !== undefined) {
    blocks = listOf('--cpu-blocks', flags.cpuBlocks).map((item) => flagValue('--cpu-blocks', item, positiveInt(MAX_CPU_BLOCKS), 0));
  } else {
    blocks = [...SWEEP_DEFAULTS.cpuBlocks];
  }
  const distinct = [...new Set(blocks)].sort((a, b) => a - b);
  if (distinct.length !== blocks.length) {
    throw new UsageError(`${flags.cpuBytes !== undefined ? '--cpu-bytes' : '--cpu-blocks'}: the same capacity is listed twice`);
  }
  return distinct;
}

function modelFlag(flags: RawSweepFlags): ModelPresetName {
  const model = flags.model ?? DEFAULT_TIMED_MODEL;
  if (!isModelPresetName(model)) throw flagError('--model', model, `expected one of ${MODEL_PRESET_NAMES.join(', ')}`);
  return model;
}

function gpuFlag(flags: RawSweepFlags): GpuProfileName {
  const gpu = flags.gpu ?? DEFAULT_GPU_PROFILE;
  if (!isGpuProfileName(gpu)) throw flagError('--gpu', gpu, `expected one of ${GPU_PROFILE_NAMES.join(', ')}`);
  return gpu;
}

function policies(text: string | undefined): SweepPolicy[] {
  const names = text === undefined ? [...SWEEP_DEFAULTS.policies] : listOf('--policies', text);
  const parsed = names.map((name) => {
    try {
      return parseSweepPolicy(name);
    } catch (err) {
      throw new UsageError(`--policies: ${err instanceof Error ? err.message : String(err)}`);
    }
  });
  if (new Set(parsed.map((p) => p.label)).size !== parsed.length) throw new UsageError('--policies: the same policy is listed twice');
  return parsed;
}

/** Options of a parsed `sweep` command. */
export function sweepOptionsFromCommand(command: Command): SweepCommandOptions {
  const flags = command.opts<RawSweepFlags>();
  if (flags.trace === undefined || flags.trace.trim() === '') throw new UsageError('--trace: expected a trace file path');
  const blockSize = flagValue('--block-size', flags.blockSize, engineSetting('blockSize'), SWEEP_DEFAULTS.blockSize);
  const offloadFactor = flagValue('--offload-factor', flags.offloadFactor, engineSetting('offloadFactor'), SWEEP_DEFAULTS.offloadFactor);
  const engine = flags.engine === true;
  if (!engine && flags.speedup !== undefined) throw new UsageError('--speedup only applies with --engine');
  if (!engine && flags.tp !== undefined) throw new UsageError('--tp only applies with --engine');
  if (engine && flags.stepMs !== undefined) throw new UsageError('--step-ms applies to the simulated replay, not with --engine (use --speedup)');
  const traceMsPerStep = flags.stepMs === undefined ? null : positiveNumberFlag('--step-ms', flags.stepMs, 0);
  const speedup = positiveNumberFlag('--speedup', flags.speedup, SWEEP_DEFAULTS.speedup);
  const outputs = (['json', 'html', 'svg'] as const).flatMap((key) => (flags[key] === undefined ? [] : [{ flag: `--${key}`, file: flags[key] }]));
  checkOutputsApart(outputs, [{ flag: '--trace', file: flags.trace }]);
  return {
    trace: flags.trace,
    cpuBlocks: capacities(flags, blockSize, offloadFactor),
    policies: policies(flags.policies),
    maxRequests: positiveIntFlag('--max-requests', flags.maxRequests, SWEEP_DEFAULTS.maxRequests),
    tokenScale: positiveIntFlag('--token-scale', flags.tokenScale, SWEEP_DEFAULTS.tokenScale),
    gpuBlocks: flagValue('--gpu-blocks', flags.gpuBlocks, engineSetting('gpuBlocks'), SWEEP_DEFAULTS.gpuBlocks),
    blockSize,
    offloadFactor,
    engine: engine ? { backend: 'host', tp: flagValue('--tp', flags.tp, engineSetting('tp'), SWEEP_DEFAULTS.tp), speedup, gpu: gpuFlag(flags) } : null,
    traceMsPerStep,
    model: modelFlag(flags),
    gpu: gpuFlag(flags),
    json: flags.json ?? null,
    html: flags.html ?? null,
    svg: flags.svg ?? null,
  };
}

/** The sweep as a terminal table, one row per point. */
export function formatSweepTable(result: SweepResult): string {
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const engine = result.mode === 'engine';
  const columns: [string, (p: SweepPoint) => string][] = [
    ['policy', (p) => p.policy],
    ['CPU blocks', (p) => n(p.cpuBlocks)],
    ['CPU hit tok', (p) => n(p.cpuHitTokens)],
    ['GPU hit tok', (p) => n(p.gpuPrefixHitTokens)],
    ['prefill tok', (p) => n(p.prefillTokensComputed)],
    ['reread tok', (p) => n(p.cpuRereadTokens + p.gpuPrefixRereadTokens)],
    ['recomputed', (p) => n(p.recomputedTokens)],
    ['CPU bound', (p) => n(p.cpuTierBoundHitTokens)],
    ['of bound', (p) => `${(100 * p.shareOfCpuTierBound).toFixed(1)}%`],
    ['GPU+CPU opt', (p) => n(p.gpuCpuOptimalHitTokens)],
    ['verified', (p) => `${p.verified}/${p.requests}`],
    ...(engine ? [] : ([['pace', (p) => (p.load === null ? '-' : `${p.load.paceRatio.toFixed(2)}x`)]] as [string, (p: SweepPoint) => string][])),
    ...(engine
      ? ([
          ['TTFT p50 ms', (p) => (p.ttftP50Ms === null ? '-' : p.ttftP50Ms.toFixed(1))],
          ['TTFT p99 ms', (p) => (p.ttftP99Ms === null ? '-' : p.ttftP99Ms.toFixed(1))],
        ] as [string, (p: SweepPoint) => string][])
      : []),
  ];
  const rows = result.points.map((p) => columns.map(([, cell]) => cell(p)));
  const widths = columns.map(([title], i) => Math.max(title.length, ...rows.map((row) => row[i].length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const header = [
    `kvtier sweep: ${result.mode} replay, trace ${result.trace.file}: ${n(result.trace.requests)} requests, lengths / ${result.trace.tokenScale}, ` +
      `${n(result.gpuBlocks)} GPU blocks` + (result.clock === null ? '' : `, clock: ${result.clock}`),
    ...sweepPaceLines(result),
    `without a CPU tier: ${n(result.baseline.prefillTokensComputed)} prefill tokens, ${n(result.baseline.gpuPrefixHitTokens)} GPU prefix hit tokens` +
      (result.baseline.ttftP50Ms === null ? '' : `, TTFT p50 ${result.baseline.ttftP50Ms.toFixed(1)} ms`),
    'CPU bound: Belady MIN with bypass at each capacity over the lookups (once per request) and stores the CPU tier sees behind the GPU tier, ' +
      'in the simulated replay of a tier that stores every computed block and serves none',
    `ceiling: an unbounded CPU tier over the same stream hits ${n(result.cpuTierCeilingHitTokens)} tokens`,
    ...boundNotes(result),
    `GPU+CPU opt: Belady MIN of one cache of that capacity with no GPU tier in front (kvtier analyze), GPU prefix and CPU hits together; ` +
      `unbounded, it hits ${n(result.gpuCpuInfiniteCacheHitTokens)} tokens`,
    '',
  ];
  return [...header, line(columns.map(([title]) => title)), ...rows.map(line), '', `${result.points.length} points in ${result.elapsedSeconds.toFixed(1)} s`].join('\n');
}

/**
 * MIN's prefix hits are a strong heuristic, not a proven optimum: the
 * proven bound beside it says how far a policy could in principle go.
 */
function boundNotes(result: SweepResult): string[] {
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const how = 'MIN with writes at any lookup, every held looked-up block counted, in whole blocks';
  if (result.cpuTierBound.every((b) => b.provenBoundTokens === b.hitTokens)) {
    return [`the CPU bound is the optimum at every capacity: it equals a bound no policy exceeds (${how})`];
  }
  const proven = result.cpuTierBound.map((b) => n(b.provenBoundTokens)).join(' / ');
  return [`proven bound (${how}): ${proven} tokens; no policy exceeds it`];
}

/** A point whose outputs differed from the reference model, as an error. */
export class SweepVerificationError extends KvtierError {
  constructor(message: string) {
    super(ERROR_CODES.sweepVerify, message);
  }
}

/** Runs the sweep, prints the table, writes JSON and HTML; returns the exit code. */
export async function sweepCommand(
  options: SweepCommandOptions,
  out: NodeJS.WritableStream = process.stdout,
  progress: NodeJS.WritableStream = process.stderr,
): Promise<number> {
  if (options.json !== null) await checkOutputFile('--json', options.json);
  if (options.html !== null) await checkOutputFile('--html', options.html);
  if (options.svg !== null) await checkOutputFile('--svg', options.svg);
  const result = await runSweep({
    traceFile: options.trace,
    maxRequests: options.maxRequests,
    tokenScale: options.tokenScale,
    gpuBlocks: options.gpuBlocks,
    cpuBlocks: options.cpuBlocks,
    policies: options.policies,
    blockSize: options.blockSize,
    offloadFactor: options.offloadFactor,
    engine: options.engine,
    ...(options.traceMsPerStep === null ? {} : { traceMsPerStep: options.traceMsPerStep }),
    clock: { kind: 'modelled', model: MODEL_PRESETS[options.model], gpu: gpuProfile(options.gpu), tp: 1 },
    onPoint: (point, done, total) => progress.write(`[${done}/${total}] ${point.policy} at ${point.cpuBlocks} CPU blocks: ${point.cpuHitTokens} CPU hit tokens\n`),
  });
  out.write(`${formatSweepTable(result)}\n`);
  if (options.json !== null) await writeJsonFile(options.json, result);
  if (options.html !== null) await writeTextFile(options.html, await sweepReportHtml(result), '--html');
  if (options.svg !== null) await writeTextFile(options.svg, `${await sweepHitsSvg(result)}\n`, '--svg');
  const unverified = result.points.filter((p) => p.verified !== p.requests);
  if (unverified.length > 0) {
    throw new SweepVerificationError(
      `${unverified.length} points have outputs that differ from the reference model: ${unverified.map((p) => `${p.policy} at ${p.cpuBlocks}`).join(', ')}`,
    );
  }
  return 0;
}
