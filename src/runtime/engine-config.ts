import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import { isModelPresetName, MODEL_PRESET_NAMES, MODEL_PRESETS } from '../model/presets.js';
import type { CopyMethod } from '../device/types.js';
import { modelShapeSchema, type ModelShape } from '../model/shape.js';
import { cpuTierGeometry } from '../offload/geometry.js';
import { DEFAULT_START_DEADLINE_MS, MAX_COMPUTE_NS_PER_TOKEN, MAX_CPU_BLOCKS, MAX_GPU_BLOCKS, MAX_TIMER_MS } from './engine-limits.js';
import { EVICTION_POLICY_NAMES } from '../offload/eviction-policy-names.js';
import type { EngineConfigInput, EvictionPolicyName, FailurePolicy, StorePolicyName } from './engine-types.js';
import { DEFAULT_REMOTE_TIMEOUT_MS, remoteTierSettings, type RemoteTierSettings } from '../remote/remote-settings.js';

const positiveInt = z.number().int().min(1);

const storePolicySchema = z.union([
  z.literal('on-compute'),
  z.literal('on-evict'),
  z.string().regex(/^reuse:[1-9][0-9]*$/, 'expected on-compute, on-evict or reuse:K with K >= 1'),
]);

export const engineConfigSchema = z
  .object({
    model: z.union([z.string(), modelShapeSchema]).default('tiny'),
    tp: positiveInt.max(64).default(1),
    backend: z.enum(['auto', 'host', 'cuda']).default('auto'),
    layout: z.enum(['cross-layer', 'per-layer']).default('cross-layer'),
    blockSize: positiveInt.max(4096).default(16),
    gpuBlocks: positiveInt.max(MAX_GPU_BLOCKS).default(1024),
    offload: z.boolean().default(true),
    cpuBlocks: z.number().int().min(0).max(MAX_CPU_BLOCKS).optional(),
    cpuBytes: z.number().int().min(0).optional(),
    offloadFactor: positiveInt.max(64).default(1),
    eviction: z.enum(EVICTION_POLICY_NAMES).default('s3fifo'),
    storePolicy: storePolicySchema.default('on-compute'),
    maxNumBatchedTokens: positiveInt.default(2048),
    maxNumSeqs: positiveInt.default(256),
    maxModelLen: positiveInt.optional(),
    enableChunkedPrefill: z.boolean().default(true),
    enablePrefixCaching: z.boolean().default(true),
    failurePolicy: z.enum(['recompute', 'fail']).default('recompute'),
    faults: z.string().default(''),
    faultSeed: z.number().int().min(0).max(0xffffffff).default(0),
    rankRestart: z.boolean().default(false),
    stepDeadlineMs: positiveInt.max(MAX_TIMER_MS).default(60_000),
    startDeadlineMs: positiveInt.max(MAX_TIMER_MS).default(DEFAULT_START_DEADLINE_MS),
    computeNsPerToken: z.number().int().min(0).max(MAX_COMPUTE_NS_PER_TOKEN).optional(),
    copyMethod: z.enum(['kernel', 'dma', 'auto']).default('auto'),
    remote: z.string().min(1).optional(),
    remotePolicy: z.enum(['write-through', 'write-back']).default('write-through'),
    remoteTimeoutMs: positiveInt.max(MAX_TIMER_MS).default(DEFAULT_REMOTE_TIMEOUT_MS),
    remoteNamespace: z.string().optional(),
  })
  .strict();

/** The engine configuration with every default applied and the model resolved. */
export interface EngineConfig {
  readonly model: ModelShape;
  readonly tp: number;
  readonly backend: 'auto' | 'host' | 'cuda';
  readonly layout: 'cross-layer' | 'per-layer';
  readonly blockSize: number;
  readonly gpuBlocks: number;
  /** Offloading is on when enabled and a CPU capacity was given. */
  readonly offload: boolean;
  readonly cpuBlocks: number | undefined;
  readonly cpuBytes: number | undefined;
  readonly offloadFactor: number;
  readonly eviction: EvictionPolicyName;
  readonly storePolicy: StorePolicyName;
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  readonly maxModelLen: number;
  readonly enableChunkedPrefill: boolean;
  readonly enablePrefixCaching: boolean;
  readonly failurePolicy: FailurePolicy;
  readonly faults: string;
  readonly faultSeed: number;
  readonly rankRestart: boolean;
  readonly stepDeadlineMs: number;
  /** Time a rank may take to open its device, at start and when restarted. */
  readonly startDeadlineMs: number;
  /** How transfer jobs move blocks on the CUDA backend (see CopyMethod). */
  readonly copyMethod: CopyMethod;
  /** The remote tier behind the CPU tier; null without one. */
  readonly remote: RemoteTierSettings | null;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const field = issue.path.length > 0 ? issue.path.join('.') : 'config';
  return `${field}: ${issue.message}`;
}

/** Validates a config and applies defaults; errors name the field. */
export function resolveEngineConfig(input: EngineConfigInput): EngineConfig {
  const parsed = engineConfigSchema.safeParse(input);
  if (!parsed.success) throw new ConfigError(`invalid engine config: ${describeIssue(parsed.error.issues[0])}`);
  const c = parsed.data;

  let model: ModelShape;
  if (typeof c.model === 'string') {
    if (!isModelPresetName(c.model)) {
      throw new ConfigError(`invalid engine config: model: unknown preset '${c.model}' (known: ${MODEL_PRESET_NAMES.join(', ')})`);
    }
    model = MODEL_PRESETS[c.model];
  } else {
    model = c.model;
  }
  if (c.computeNsPerToken !== undefined) model = { ...model, computeNsPerToken: c.computeNsPerToken };
  if (model.kvHeads % c.tp !== 0) {
    throw new ConfigError(`invalid engine config: tp: ${c.tp} does not divide the model's ${model.kvHeads} KV heads`);
  }
  if (c.cpuBlocks !== undefined && c.cpuBytes !== undefined) {
    throw new ConfigError('invalid engine config: cpuBlocks and cpuBytes: give one of them, not both');
  }
  const capacity = c.gpuBlocks * c.blockSize;
  const maxModelLen = c.maxModelLen ?? Math.min(131_072, capacity);
  if (maxModelLen > capacity) {
    throw new ConfigError(
      `invalid engine config: maxModelLen: ${maxModelLen} tokens exceed the GPU KV cache (${c.gpuBlocks} blocks x ${c.blockSize} tokens)`,
    );
  }
  const offload = c.offload && ((c.cpuBlocks ?? 0) > 0 || (c.cpuBytes ?? 0) > 0);
  if (offload && c.cpuBytes !== undefined) checkCpuBytes(model, c);
  const remote = remoteTierSettings(c, model, offload);
  return {
    model,
    tp: c.tp,
    backend: c.backend,
    layout: c.layout,
    blockSize: c.blockSize,
    gpuBlocks: c.gpuBlocks,
    offload,
    cpuBlocks: c.cpuBlocks,
    cpuBytes: c.cpuBytes,
    offloadFactor: c.offloadFactor,
    eviction: c.eviction,
    storePolicy: c.storePolicy as StorePolicyName,
    maxNumBatchedTokens: c.maxNumBatchedTokens,
    maxNumSeqs: c.maxNumSeqs,
    maxModelLen,
    enableChunkedPrefill: c.enableChunkedPrefill,
    enablePrefixCaching: c.enablePrefixCaching,
    failurePolicy: c.failurePolicy,
    faults: c.faults,
    faultSeed: c.faultSeed,
    rankRestart: c.rankRestart,
    stepDeadlineMs: c.stepDeadlineMs,
    startDeadlineMs: c.startDeadlineMs,
    copyMethod: c.copyMethod,
    remote,
  };
}

/** A CPU tier given in bytes holds at least one block and at most MAX_CPU_BLOCKS. */
function checkCpuBytes(model: ModelShape, c: { tp: number; blockSize: number; offloadFactor: number; cpuBytes?: number }): void {
  let capacity: number;
  try {
    capacity = cpuTierGeometry({ model, tp: c.tp, blockSize: c.blockSize, offloadFactor: c.offloadFactor, cpuBytes: c.cpuBytes }).capacityBlocks;
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`invalid engine config: ${error.message}`);
    throw error;
  }
  if (capacity > MAX_CPU_BLOCKS) {
    throw new ConfigError(`invalid engine config: cpuBytes: ${c.cpuBytes} bytes make ${capacity} CPU blocks, over the limit of ${MAX_CPU_BLOCKS}`);
  }
}
