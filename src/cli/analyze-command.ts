import { Command } from 'commander';
import { z } from 'zod';
import { cpuBytesCapacity, cpuBytesIssue } from '../config/engine-rules.js';
import { MAX_CPU_BLOCKS } from '../config/limits.js';
import { MODEL_PRESETS, MODEL_PRESET_NAMES } from '../model/presets.js';
import { KV_ELEMENT_BYTES, elementsPerToken } from '../model/shape.js';
import { analyzeLoadedTrace, formatAnalysis, loadAnalyzedTrace, type AnalyzeOptions } from '../analysis/analyze.js';
import { cpuTierBoundAnalysis } from '../bench/cpu-tier-bound.js';
import { parseCommandArgs } from './command-parse.js';
import { checkNotAnInput, flagInput, originOf, parseInput, rejectBoth, settingError } from './config-input.js';
import { byteSize, engineSetting, modelPreset, nonEmptyString, positiveInt, timeWindow, tokenScale } from './field-schemas.js';
import { checkOutputFile, writeJsonFile } from './output-file.js';
import { RUN_DEFAULTS } from './run-defaults.js';
import { UsageError } from './usage-error.js';

/** `kvtier analyze` flags. */
export function createAnalyzeCommand(): Command {
  return new Command('analyze')
    .description(
      'reuse profile of a Mooncake trace and the GPU+CPU optimum: Belady MIN hit tokens of one cache on offloaded-block accesses, ' +
        'counting prefix hits (no GPU tier in front, so GPU prefix and CPU-tier hits together; blocks of block-size x offload-factor ' +
        'tokens after token scaling); with --gpu-blocks also the CPU tier\'s bound behind that GPU pool and its unbounded ceiling',
    )
    .requiredOption('--trace <file>', 'Mooncake trace (JSONL)')
    .option('--cpu-blocks <n>', `CPU tier capacity in offloaded blocks (default ${RUN_DEFAULTS.cpuBlocks})`)
    .option('--cpu-bytes <size>', 'CPU tier capacity in bytes over all ranks (e.g. 2GiB), converted with --model\'s KV size')
    .option('--model <name>', `model preset for --cpu-bytes: ${MODEL_PRESET_NAMES.join(' | ')} (default ${RUN_DEFAULTS.model})`)
    .option('--block-size <tokens>', `tokens per GPU block (default ${RUN_DEFAULTS.blockSize})`)
    .option('--offload-factor <n>', `GPU blocks per offloaded block (default ${RUN_DEFAULTS.offloadFactor})`)
    .option('--token-scale <n>', 'divide lengths and the 512-token trace block by N, as in kvtier run')
    .option('--max-requests <n>', 'analyze at most N requests (after --time-window)')
    .option('--time-window <start:end>', 'requests arriving START..END seconds into the trace')
    .option(
      '--gpu-blocks <n>',
      `GPU KV blocks in front of the CPU tier: replays the slice (simulated, on the modelled step clock of llama-8b on an H100) and reports ` +
        'the CPU tier\'s bound (Belady over what the tier sees behind the GPU) and the unbounded tier\'s ceiling',
    )
    .option('--json <file>', 'also write the analysis as JSON')
    .allowExcessArguments(false);
}

const analyzeInputSchema = z
  .object({
    trace: nonEmptyString('a trace file path'),
    cpuBlocks: positiveInt(MAX_CPU_BLOCKS),
    cpuBytes: byteSize(),
    model: modelPreset(),
    blockSize: engineSetting('blockSize'),
    offloadFactor: engineSetting('offloadFactor'),
    tokenScale: tokenScale(),
    gpuBlocks: engineSetting('gpuBlocks'),
    maxRequests: positiveInt(),
    timeWindow: timeWindow(),
    json: nonEmptyString('an output file path'),
  })
  .partial()
  .strict();

export interface AnalyzeCommandOptions extends AnalyzeOptions {
  /** GPU blocks in front of the CPU tier, for the CPU tier's bound (null: the GPU+CPU optimum alone). */
  readonly gpuBlocks: number | null;
  /** Where to write the JSON analysis, if anywhere. */
  readonly json: string | null;
}

/** Options of a parsed `analyze` command. */
export function analyzeOptionsFromCommand(command: Command): AnalyzeCommandOptions {
  const input = flagInput(command);
  const given = parseInput(analyzeInputSchema, input);
  rejectBoth(input, 'cpuBlocks', 'cpuBytes', 'size the CPU tier');
  if (given.model !== undefined && given.cpuBytes === undefined) {
    throw new UsageError(`${originOf(input, 'model')} only converts --cpu-bytes into blocks; give --cpu-bytes or drop it`);
  }
  const blockSize = given.blockSize ?? RUN_DEFAULTS.blockSize;
  const offloadFactor = given.offloadFactor ?? RUN_DEFAULTS.offloadFactor;
  let cpuBlocks = given.cpuBlocks ?? RUN_DEFAULTS.cpuBlocks;
  if (given.cpuBytes !== undefined) {
    const shape = MODEL_PRESETS[given.model ?? RUN_DEFAULTS.model];
    // The engine's rule: at least one offloaded block, at most its limit.
    const issue = cpuBytesIssue(shape, blockSize, offloadFactor, given.cpuBytes);
    if (issue !== null) throw settingError(input, issue);
    cpuBlocks = cpuBytesCapacity(shape, blockSize, offloadFactor, given.cpuBytes).blocks;
  }
  if (given.json !== undefined) checkNotAnInput(input, 'json', given.json, [given.trace as string]);
  return {
    trace: given.trace as string,
    cpuBlocks,
    blockSize,
    offloadFactor,
    tokenScale: given.tokenScale ?? 1,
    maxRequests: given.maxRequests ?? null,
    timeWindow: given.timeWindow ?? null,
    gpuBlocks: given.gpuBlocks ?? null,
    json: given.json ?? null,
  };
}

/** Parses `kvtier analyze`'s arguments (without program and command names). */
export function parseAnalyzeArgs(argv: readonly string[]): AnalyzeCommandOptions {
  return analyzeOptionsFromCommand(parseCommandArgs(createAnalyzeCommand(), argv));
}

/** Runs the analysis, prints it and writes the JSON file; returns the exit code. */
export async function analyzeCommand(options: AnalyzeCommandOptions, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  if (options.json !== null) await checkOutputFile('--json', options.json);
  const trace = await loadAnalyzedTrace(options);
  if (trace.records.length === 0) {
    const range = options.timeWindow ?? null;
    const window = range === null ? '' : ` in --time-window ${range[0]}:${range[1] === Infinity ? '' : range[1]}`;
    throw new UsageError(`${options.trace}: no requests to analyze${window}`);
  }
  const optimum = analyzeLoadedTrace(trace, options);
  const analysis =
    options.gpuBlocks === null
      ? optimum
      : {
          ...optimum,
          cpuTierBound: await cpuTierBoundAnalysis(trace, {
            gpuBlocks: options.gpuBlocks,
            cpuBlocks: options.cpuBlocks,
            blockSize: options.blockSize ?? RUN_DEFAULTS.blockSize,
            offloadFactor: options.offloadFactor ?? RUN_DEFAULTS.offloadFactor,
          }),
        };
  out.write(`${formatAnalysis(analysis)}\n`);
  if (options.json !== null) await writeJsonFile(options.json, analysis);
  return 0;
}
