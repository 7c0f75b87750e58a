import { Command } from 'commander';
import { z } from 'zod';
import { runSweep, parseSweepPolicy, type SweepPoint, type SweepPolicy, type SweepResult } from '../bench/sweep.js';
import { ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { cpuBytesCapacity, cpuBytesIssue } from '../config/engine-rules.js';
import { MAX_CPU_BLOCKS } from '../config/limits.js';
import { KvtierError } from '../core/errors.js';
import { MODEL_PRESETS, MODEL_PRESET_NAMES, type ModelPresetName } from '../model/presets.js';
import { DEFAULT_TIMED_MODEL } from '../bench/replay-clock.js';
import { DEFAULT_GPU_PROFILE, GPU_PROFILE_NAMES, gpuProfile, type GpuProfileName } from '../timing/gpu-profiles.js';
import { EVICTION_POLICY_NAMES } from '../config/eviction-policy-names.js';
import { sweepHitsSvg, sweepPaceLines, sweepReportHtml } from '../bench/sweep-report.js';
import { parseByteSize } from '../core/byte-size.js';
import { flagInput, invalidItem, invalidValue, originOf, parseInput, rejectBoth, type LayeredInput } from './config-input.js';
import { engineSetting, oneOf, positiveInt, positiveNumber } from './field-schemas.js';
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

/** The sweep's flags, each checked by its field schema; the lists are read item by item below. */
const sweepInputSchema = z
  .object({
    trace: z.string(),
    cpuBlocks: z.string(),
    cpuBytes: z.string(),
    model: oneOf(MODEL_PRESET_NAMES as unknown as readonly [ModelPresetName, ...ModelPresetName[]]),
    gpu: oneOf(GPU_PROFILE_NAMES as unknown as readonly [GpuProfileName, ...GpuProfileName[]]),
    policies: z.string(),
    maxRequests: positiveInt(),
    tokenScale: positiveInt(),
    gpuBlocks: engineSetting('gpuBlocks'),
    blockSize: engineSetting('blockSize'),
    offloadFactor: engineSetting('offloadFactor'),
    stepMs: positiveNumber(),
    engine: z.boolean(),
    speedup: positiveNumber(),
    tp: engineSetting('tp'),
    json: z.string(),
    html: z.string(),
    svg: z.string(),
  })
  .partial()
  .strict();

type SweepInput = z.output<typeof sweepInputSchema>;

/** A list flag's items, none empty. */
function listOf(input: LayeredInput, key: string, text: string): string[] {
  const items = text.split(',').map((item) => item.trim());
  if (items.some((item) => item === '')) throw invalidValue(input, key, 'expected a comma-separated list with no empty items');
  return items;
}

function capacities(input: LayeredInput, given: SweepInput, blockSize: number, offloadFactor: number): number[] {
  rejectBoth(input, 'cpuBlocks', 'cpuBytes', 'size the CPU tier');
  let blocks: number[];
  if (given.cpuBytes !== undefined) {
    const model = given.model ?? DEFAULT_TIMED_MODEL;
    const shape = MODEL_PRESETS[model];
    blocks = listOf(input, 'cpuBytes', given.cpuBytes).map((item) => {
      const bytes = parseByteSize(item);
      if (bytes === null) throw invalidItem(input, 'cpuBytes', item, 'expected a size such as 64MiB or 2GB');
      // The engine's rule: at least one offloaded block, at most its limit.
      const issue = cpuBytesIssue(shape, blockSize, offloadFactor, bytes);
      if (issue?.kind === 'invalid') throw invalidItem(input, 'cpuBytes', item, `${issue.message} (--model ${model})`);
      return cpuBytesCapacity(shape, blockSize, offloadFactor, bytes).blocks;
    });
  } else if (given.cpuBlocks !== undefined) {
    const capacity = positiveInt(MAX_CPU_BLOCKS);
    blocks = listOf(input, 'cpuBlocks', given.cpuBlocks).map((item) => {
      const parsed = capacity.safeParse(item);
      if (!parsed.success) throw invalidItem(input, 'cpuBlocks', item, parsed.error.issues[0].message);
      return parsed.data;
    });
  } else {
    blocks = [...SWEEP_DEFAULTS.cpuBlocks];
  }
  const distinct = [...new Set(blocks)].sort((a, b) => a - b);
  if (distinct.length !== blocks.length) {
    throw new UsageError(`${originOf(input, given.cpuBytes !== undefined ? 'cpuBytes' : 'cpuBlocks')}: the same capacity is listed twice`);
  }
  return distinct;
}

function policies(input: LayeredInput, text: string | undefined): SweepPolicy[] {
  const names = text === undefined ? [...SWEEP_DEFAULTS.policies] : listOf(input, 'policies', text);
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

/** Options of a parsed `sweep` command, read through the same layer as run's and analyze's flags (config-input.ts). */
export function sweepOptionsFromCommand(command: Command): SweepCommandOptions {
  const input = flagInput(command);
  const given = parseInput(sweepInputSchema, input);
  const trace = given.trace;
  if (trace === undefined || trace.trim() === '') throw new UsageError('--trace: expected a trace file path');
  const blockSize = given.blockSize ?? SWEEP_DEFAULTS.blockSize;
  const offloadFactor = given.offloadFactor ?? SWEEP_DEFAULTS.offloadFactor;
  const engine = given.engine === true;
  if (!engine && given.speedup !== undefined) throw new UsageError('--speedup only applies with --engine');
  if (!engine && given.tp !== undefined) throw new UsageError('--tp only applies with --engine');
  if (engine && given.stepMs !== undefined) throw new UsageError('--step-ms applies to the simulated replay, not with --engine (use --speedup)');
  const gpu = given.gpu ?? DEFAULT_GPU_PROFILE;
  const outputs = (['json', 'html', 'svg'] as const).flatMap((key) => (given[key] === undefined ? [] : [{ flag: `--${key}`, file: given[key] }]));
  checkOutputsApart(outputs, [{ flag: '--trace', file: trace }]);
  return {
    trace,
    cpuBlocks: capacities(input, given, blockSize, offloadFactor),
    policies: policies(input, given.policies),
    maxRequests: given.maxRequests ?? SWEEP_DEFAULTS.maxRequests,
    tokenScale: given.tokenScale ?? SWEEP_DEFAULTS.tokenScale,
    gpuBlocks: given.gpuBlocks ?? SWEEP_DEFAULTS.gpuBlocks,
    blockSize,
    offloadFactor,
    engine: engine ? { backend: 'host', tp: given.tp ?? SWEEP_DEFAULTS.tp, speedup: given.speedup ?? SWEEP_DEFAULTS.speedup, gpu } : null,
    traceMsPerStep: given.stepMs ?? null,
    model: given.model ?? DEFAULT_TIMED_MODEL,
    gpu,
    json: given.json ?? null,
    html: given.html ?? null,
    svg: given.svg ?? null,
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
