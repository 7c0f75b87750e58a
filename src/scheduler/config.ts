import { z } from 'zod';
import { ConfigError } from '../core/errors.js';

/**
 * Scheduler configuration: one zod schema, validated before anything starts;
 * every error names the field and the value it got.
 */

const positiveInt = (max: number) => z.number().int().min(1).max(max);

export const schedulerConfigSchema = z
  .object({
    /** Tokens per GPU block. */
    blockSize: positiveInt(4096),
    /** GPU KV blocks (per rank; every rank holds its heads of every block). */
    numGpuBlocks: positiveInt(1 << 26),
    /** Token budget of one step. */
    maxNumBatchedTokens: positiveInt(1 << 24),
    /** Most requests running or waiting for KV at once. */
    maxNumSeqs: positiveInt(1 << 20),
    /** Longest prompt + output a request may have. */
    maxModelLen: positiveInt(1 << 24),
    enableChunkedPrefill: z.boolean().default(true),
    enablePrefixCaching: z.boolean().default(true),
    /** What happens to requests whose KV failed to load: recompute it, or finish with an error. */
    failurePolicy: z.enum(['recompute', 'fail']).default('recompute'),
    vocabSize: z.number().int().min(2).max(2 ** 31 - 1),
  })
  .strict();

export type SchedulerConfigInput = z.input<typeof schedulerConfigSchema>;
export type SchedulerConfig = Readonly<z.output<typeof schedulerConfigSchema>>;

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = input;
  for (const key of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') return `'${value}'`;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  if (issue.code === 'unrecognized_keys') {
    return `scheduler config: unknown field(s) ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
  }
  const field = issue.path.map(String).join('.') || '(root)';
  return `scheduler config: field '${field}': ${issue.message} (got ${show(valueAt(input, issue.path))})`;
}

/** Validates `input` and applies defaults. Throws ConfigError naming the field. */
export function parseSchedulerConfig(input: unknown): SchedulerConfig {
  const result = schedulerConfigSchema.safeParse(input);
  if (!result.success) {
    throw new ConfigError(describeIssue(result.error.issues[0], input), { cause: result.error });
  }
  const config = result.data;
  const blocksForLongest = Math.ceil(config.maxModelLen / config.blockSize);
  if (blocksForLongest > config.numGpuBlocks) {
    // A request of maxModelLen tokens could never get all its blocks and would preempt itself forever.
    throw new ConfigError(
      `scheduler config: field 'maxModelLen': ${config.maxModelLen} tokens need ${blocksForLongest} blocks of ` +
        `${config.blockSize}, more than numGpuBlocks ${config.numGpuBlocks}`,
    );
  }
  if (!config.enableChunkedPrefill && config.maxNumBatchedTokens < config.maxModelLen) {
    // Without chunking a whole prompt must fit in one step's budget.
    throw new ConfigError(
      `scheduler config: field 'maxNumBatchedTokens': ${config.maxNumBatchedTokens} is below maxModelLen ` +
        `${config.maxModelLen}, which enableChunkedPrefill=false requires`,
    );
  }
  return Object.freeze(config);
}
