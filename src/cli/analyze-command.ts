import { Command } from 'commander';
import { z } from 'zod';
import { MODEL_PRESETS, MODEL_PRESET_NAMES } from '../model/presets.js';
import { KV_ELEMENT_BYTES, elementsPerToken } from '../model/shape.js';
import { analyzeTrace, formatAnalysis, type AnalyzeOptions } from '../analysis/analyze.js';
import { parseCommandArgs } from './command-parse.js';
import { checkNotAnInput, flagInput, originOf, parseInput, rejectBoth } from './config-input.js';
import { byteSize, modelPreset, nonEmptyString, positiveInt, timeWindow, tokenScale } from './field-schemas.js';
import { checkOutputFile, writeJsonFile } from './output-file.js';
import { RUN_DEFAULTS } from './run-defaults.js';
import { UsageError } from './usage-error.js';

/** `kvtier analyze` flags. */
export function createAnalyzeCommand(): Command {
  return new Command('analyze')
    .description(
      'reuse profile of a Mooncake trace and the CPU-tier hit tokens of Belady MIN on offloaded-block accesses, counting prefix hits ' +
        '(no GPU tier in front; blocks of block-size x offload-factor tokens after token scaling): read a run\'s CPU hits as a fraction of it',
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
    .option('--json <file>', 'also write the analysis as JSON')
    .allowExcessArguments(false);
}

const analyzeInputSchema = z
  .object({
    trace: nonEmptyString('a trace file path'),
    cpuBlocks: positiveInt(),
    cpuBytes: byteSize(),
    model: modelPreset(),
    blockSize: positiveInt(),
    offloadFactor: positiveInt(),
    tokenScale: tokenScale(),
    maxRequests: positiveInt(),
    timeWindow: timeWindow(),
    json: nonEmptyString('an output file path'),
  })
  .partial()
  .strict();

export interface AnalyzeCommandOptions extends AnalyzeOptions {
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
    // An offloaded block over all ranks: every layer, K and V, every head, for blockSize x offloadFactor tokens.
    const bytesPerBlock = elementsPerToken(shape) * KV_ELEMENT_BYTES * blockSize * offloadFactor;
    cpuBlocks = Math.floor(given.cpuBytes / bytesPerBlock);
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
  const analysis = await analyzeTrace(options);
  if (analysis.trace.requests === 0) {
    const range = options.timeWindow ?? null;
    const window = range === null ? '' : ` in --time-window ${range[0]}:${range[1] === Infinity ? '' : range[1]}`;
    throw new UsageError(`${options.trace}: no requests to analyze${window}`);
  }
  out.write(`${formatAnalysis(analysis)}\n`);
  if (options.json !== null) await writeJsonFile(options.json, analysis);
  return 0;
}
