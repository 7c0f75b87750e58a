import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import { engineConfigSchema, engineField } from '../config/engine-schema.js';
import { modelLenIssue, stepBudgetIssue } from '../config/engine-rules.js';
import { describeConfigIssue, issueFromZod, objectNaming, type ConfigIssue } from '../config/issues.js';
import { modelShapeSchema } from '../model/shape.js';

/**
 * Scheduler configuration: the engine's scheduling settings, whose types,
 * limits, defaults and rules come from the engine's schema
 * (src/config/engine-schema.ts, engine-rules.ts). Validated before anything
 * starts; every error names the field and the value it got.
 */
const engine = engineConfigSchema.shape;

export const schedulerConfigSchema = z
  .object({
    /** Tokens per GPU block. */
    blockSize: engineField('blockSize'),
    /** GPU KV blocks (per rank; every rank holds its heads of every block). */
    numGpuBlocks: engineField('gpuBlocks'),
    /** Token budget of one step. */
    maxNumBatchedTokens: engineField('maxNumBatchedTokens'),
    /** Most requests running or waiting for KV at once. */
    maxNumSeqs: engineField('maxNumSeqs'),
    /** Longest prompt + output a request may have. */
    maxModelLen: engineField('maxModelLen'),
    enableChunkedPrefill: engine.enableChunkedPrefill,
    enablePrefixCaching: engine.enablePrefixCaching,
    /** What happens to requests whose KV failed to load: recompute it, or finish with an error. */
    failurePolicy: engine.failurePolicy,
    vocabSize: modelShapeSchema.shape.vocabSize,
  })
  .strict();

export type SchedulerConfigInput = z.input<typeof schedulerConfigSchema>;
export type SchedulerConfig = Readonly<z.output<typeof schedulerConfigSchema>>;

/** Validates `input` and applies defaults. Throws ConfigError naming the field. */
export function parseSchedulerConfig(input: unknown): SchedulerConfig {
  const fail = (issue: ConfigIssue, cause?: unknown): never => {
    throw new ConfigError(`scheduler config: ${describeConfigIssue(issue, objectNaming(input))}`, { cause });
  };
  const result = schedulerConfigSchema.safeParse(input);
  if (!result.success) return fail(issueFromZod(result.error.issues[0]), result.error);
  const config = result.data;
  const issue =
    modelLenIssue(config.maxModelLen, config.numGpuBlocks, config.blockSize) ??
    stepBudgetIssue(config.maxNumBatchedTokens, config.maxModelLen, config.enableChunkedPrefill);
  if (issue !== null) return fail(issue);
  return Object.freeze(config);
}
