import { z } from 'zod';
import { MODEL_PRESET_NAMES, type ModelPresetName } from '../model/presets.js';
import { modelShapeSchema } from '../model/shape.js';
import { GPU_PROFILE_NAMES } from '../timing/gpu-profiles.js';
import { EVICTION_POLICY_NAMES } from './eviction-policy-names.js';
import { isStorePolicyName, STORE_POLICY_EXPECTED, type StorePolicyName } from './store-policy-name.js';
import { flag, nonNegativeInt, oneOf, positiveInt } from './fields.js';
import {
  DEFAULT_REMOTE_RETRY_BACKOFF_MS,
  DEFAULT_REMOTE_TIMEOUT_MS,
  DEFAULT_REMOTE_WRITE_ATTEMPTS,
  DEFAULT_START_DEADLINE_MS,
  MAX_BLOCK_SIZE,
  MAX_COMPUTE_NS_PER_TOKEN,
  MAX_CPU_BLOCKS,
  MAX_GPU_BLOCKS,
  MAX_MODEL_LEN,
  MAX_NUM_BATCHED_TOKENS,
  MAX_NUM_SEQS,
  MAX_OFFLOAD_FACTOR,
  MAX_REMOTE_WRITE_ATTEMPTS,
  MAX_SEED,
  MAX_TIMER_MS,
  MAX_TP,
} from './limits.js';
import { POOL_DEFAULTS } from './pool-defaults.js';

/**
 * The engine's configuration schema: every setting's type, limit and default,
 * stated once. The library validates against it (resolveEngineConfig), the
 * scheduler's config takes its fields from it (src/scheduler/config.ts), the
 * CLI's `kvtier run` schema is built from its fields (src/cli/run-config.ts),
 * and the library's config types are inferred from it. Rules across settings
 * live in engine-rules.ts.
 */

/** The model a config that names none runs. */
export const DEFAULT_MODEL: ModelPresetName = 'tiny';

/** A store policy name (the grammar is store-policy-name.ts). */
export const storePolicyField = () => z.custom<StorePolicyName>(isStorePolicyName, { error: STORE_POLICY_EXPECTED });

export const engineConfigSchema = z
  .object({
    /** A preset name (src/model/presets.ts) or a full shape. Default 'tiny'. */
    model: z
      .union([z.string(), modelShapeSchema], { error: `expected a model preset (${MODEL_PRESET_NAMES.join(', ')}) or a model shape` })
      .default(DEFAULT_MODEL),
    tp: positiveInt(MAX_TP).default(1),
    backend: oneOf(['auto', 'host', 'cuda']).default('auto'),
    layout: oneOf(['cross-layer', 'per-layer']).default('cross-layer'),
    blockSize: positiveInt(MAX_BLOCK_SIZE).default(16),
    /** GPU KV blocks per rank (each rank holds its heads of every block). */
    gpuBlocks: positiveInt(MAX_GPU_BLOCKS).default(POOL_DEFAULTS.engine.gpuBlocks),
    /** Offloading: off when `offload` is false or neither cpuBlocks nor cpuBytes is given. */
    offload: flag().default(true),
    /** CPU tier capacity in offloaded blocks. */
    cpuBlocks: nonNegativeInt(MAX_CPU_BLOCKS).optional(),
    /** Total CPU tier bytes over all ranks. */
    cpuBytes: nonNegativeInt().optional(),
    /** GPU blocks per offloaded block. */
    offloadFactor: positiveInt(MAX_OFFLOAD_FACTOR).default(1),
    eviction: oneOf(EVICTION_POLICY_NAMES).default('classhold+queue'),
    /** 'on-compute' (default), 'on-evict' (write-back), or 'reuse:K' (store blocks looked up at least K times). */
    storePolicy: storePolicyField().default('on-compute'),
    /** Token budget of one step. */
    maxNumBatchedTokens: positiveInt(MAX_NUM_BATCHED_TOKENS).default(2048),
    /** Most requests running or waiting for KV at once. */
    maxNumSeqs: positiveInt(MAX_NUM_SEQS).default(256),
    /** Longest prompt + output a request may have; default: the GPU KV cache, at most 131072 tokens. */
    maxModelLen: positiveInt(MAX_MODEL_LEN).optional(),
    enableChunkedPrefill: flag().default(true),
    enablePrefixCaching: flag().default(true),
    /** What happens to requests whose KV failed to load: recompute it, or finish with an error. */
    failurePolicy: oneOf(['recompute', 'fail']).default('recompute'),
    /** Fault plan string (see src/faults/plan.ts) and its seed. */
    faults: z.string({ error: 'expected a fault plan' }).default(''),
    faultSeed: nonNegativeInt(MAX_SEED).default(0),
    rankRestart: flag().default(false),
    stepDeadlineMs: positiveInt(MAX_TIMER_MS).default(60_000),
    /** Time a rank may take to open its device, at start and when restarted. */
    startDeadlineMs: positiveInt(MAX_TIMER_MS).default(DEFAULT_START_DEADLINE_MS),
    /** The GPU the step clock prices steps on, and whose host link the host backend's transfers follow; default: the CUDA device's own, else h100-sxm. */
    gpu: oneOf(GPU_PROFILE_NAMES).optional(),
    /** Override the step clock: a flat compute time per new token (ns, whole model). */
    computeNsPerToken: nonNegativeInt(MAX_COMPUTE_NS_PER_TOKEN).optional(),
    /** How transfer jobs move blocks on the CUDA backend (default auto; the host backend always uses memcpy). */
    copyMethod: oneOf(['kernel', 'dma', 'auto']).default('auto'),
    /** The remote tier behind the CPU tier: a redis:// or rediss:// URL; absent, no remote tier. */
    remote: z.string({ error: 'expected a redis:// or rediss:// URL' }).min(1, { error: 'expected a redis:// or rediss:// URL' }).optional(),
    /** When a block goes to the remote tier: once its CPU-tier store completes, or when the CPU tier evicts it. */
    remotePolicy: oneOf(['write-through', 'write-back']).default('write-through'),
    /** How long a remote lookup or read may take before it counts as a miss. */
    remoteTimeoutMs: positiveInt(MAX_TIMER_MS).default(DEFAULT_REMOTE_TIMEOUT_MS),
    /** Tries a remote write gets when it fails transiently (timeout, connection, server error); 1: never retried. */
    remoteWriteAttempts: positiveInt(MAX_REMOTE_WRITE_ATTEMPTS).default(DEFAULT_REMOTE_WRITE_ATTEMPTS),
    /** Wait before a failed remote write's first retry (ms); each further retry waits twice as long (at most 30 s). */
    remoteRetryBackoffMs: nonNegativeInt(MAX_TIMER_MS).default(DEFAULT_REMOTE_RETRY_BACKOFF_MS),
    /** The remote keys' namespace; default: derived from the model's name. */
    remoteNamespace: z.string({ error: 'expected a namespace name' }).min(1, { error: 'expected a namespace name' }).optional(),
    /**
     * The secret remote values are authenticated with (at least 16 bytes); absent, the file
     * remoteSecretFile names, else the environment's KVTIER_REMOTE_SECRET, else none.
     */
    remoteSecret: z.string({ error: 'expected a secret string' }).optional(),
    /** A file holding the remote secret (one trailing newline is dropped). */
    remoteSecretFile: z.string({ error: 'expected a file path' }).min(1, { error: 'expected a file path' }).optional(),
    /** Encrypt remote values too (AES-256-GCM), not only authenticate them; needs a secret. */
    remoteEncrypt: flag().default(false),
  })
  .strict();

type EngineShape = typeof engineConfigSchema.shape;
export type EngineSettingKey = keyof EngineShape;

/** Engine configuration before defaults are applied. */
export type EngineConfigInput = z.input<typeof engineConfigSchema>;

/** Engine configuration with every default applied, before the model is resolved. */
export type EngineSettings = z.output<typeof engineConfigSchema>;

/** Every default of the engine's settings. */
export const ENGINE_DEFAULTS: Readonly<EngineSettings> = Object.freeze(engineConfigSchema.parse({}));

type WithoutDefault<T> = T extends z.ZodDefault<infer U> ? U : T extends z.ZodOptional<infer U> ? U : T;

/** One setting's own schema, without its default: for configs that give the value themselves or layer their own defaults. */
export function engineField<K extends EngineSettingKey>(key: K): WithoutDefault<EngineShape[K]> {
  const field: z.ZodType = engineConfigSchema.shape[key];
  return (field instanceof z.ZodDefault || field instanceof z.ZodOptional ? field.unwrap() : field) as WithoutDefault<EngineShape[K]>;
}

/** The range the schema allows an integer setting (for options that read it outside the schema, such as the benches'). */
export function engineIntRange(key: EngineSettingKey): { readonly min: number; readonly max: number } {
  const field: z.ZodType = engineField(key);
  if (!(field instanceof z.ZodNumber)) throw new TypeError(`${key} is not a number setting`);
  return { min: field.minValue ?? Number.MIN_SAFE_INTEGER, max: field.maxValue ?? Number.MAX_SAFE_INTEGER };
}
