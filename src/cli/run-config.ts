import type { GpuProfileName } from '../timing/gpu-profiles.js';
import type { Command } from 'commander';
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import type { BackendName, CopyMethod, KvLayout } from '../device/types.js';
import { FaultPlanError, parseFaultPlan, validateFaultPlanBlocks, validateFaultPlanRanks } from '../faults/plan.js';
import { engineField } from '../config/engine-schema.js';
import { engineRuleIssue } from '../config/engine-rules.js';
import { MAX_CPU_BLOCKS } from '../config/limits.js';
import { MODEL_PRESETS, type ModelPresetName } from '../model/presets.js';
import type { EngineConfigInput, EvictionPolicyName, FailurePolicy, StorePolicyName } from '../runtime/engine-types.js';
import { MULTITURN_DEFAULTS } from '../workload/multiturn.js';
import { parseCommandArgs } from './command-parse.js';
import {
  checkNotAnInput,
  flagInput,
  invalidValue,
  mergeInputs,
  originOf,
  parseInput,
  readConfigFile,
  rejectBoth,
  rejectStringNumbers,
  settingError,
  type LayeredInput,
} from './config-input.js';
import {
  byteSize,
  engineSetting,
  flag,
  modelPreset,
  nonEmptyString,
  nonNegativeInt,
  oneOf,
  positiveInt,
  positiveNumber,
  timeWindow,
  tokenScale,
} from './field-schemas.js';
import { RUN_DEFAULTS } from './run-defaults.js';
import { createRunCommand } from './run-flags.js';
import { monitoringConfig, monitoringInputFields, type RunMonitoringConfig } from './run-monitoring-config.js';
import { kvEventsConfig, kvEventsInputFields, type KvEventsConfig } from './run-kv-events.js';
import { UsageError } from './usage-error.js';
import { RemoteConfigError } from '../remote/errors.js';
import { checkNamespaceName } from '../remote/remote-keys.js';
import { parseRemoteUrl } from '../remote/remote-url.js';
import { checkOutputsApart } from './output-file.js';
import { checkRemoteSecret, readSecretFile, REMOTE_SECRET_ENV } from '../remote/remote-secret.js';

export { UsageError } from './usage-error.js';
export { RUN_DEFAULTS } from './run-defaults.js';

/**
 * Everything `kvtier run` accepts, from flags or a JSON or YAML config file (one
 * schema for both; flags override the file; unknown keys are errors). The
 * engine's settings are the engine schema's own fields (engineSetting), so
 * their types, limits and messages are the engine's.
 */
export const runInputSchema = z
  .object({
    backend: engineSetting('backend'),
    tp: engineSetting('tp'),
    /** The CLI runs presets only. */
    model: modelPreset(),
    layout: engineSetting('layout'),
    blockSize: engineSetting('blockSize'),
    gpuBlocks: engineSetting('gpuBlocks'),
    /** At least one block: the command line turns the CPU tier off with --no-offload. */
    cpuBlocks: positiveInt(MAX_CPU_BLOCKS),
    /** Sizes with units ("512MiB"), then the engine's own check. */
    cpuBytes: byteSize().pipe(engineField('cpuBytes')),
    offloadFactor: engineSetting('offloadFactor'),
    eviction: engineSetting('eviction'),
    storePolicy: engineSetting('storePolicy'),
    offload: engineSetting('offload'),
    workload: oneOf(['multiturn', 'trace']),
    requests: positiveInt(),
    rounds: positiveInt(),
    seed: nonNegativeInt(),
    trace: nonEmptyString('a trace file path'),
    maxRequests: positiveInt(),
    timeWindow: timeWindow(),
    tokenScale: tokenScale(),
    speedup: positiveNumber(),
    arrivals: flag(),
    faults: nonEmptyString('a fault plan'),
    faultSeed: engineSetting('faultSeed'),
    failurePolicy: engineSetting('failurePolicy'),
    rankRestart: engineSetting('rankRestart'),
    stepDeadlineMs: engineSetting('stepDeadlineMs'),
    startDeadlineMs: engineSetting('startDeadlineMs'),
    compare: flag(),
    json: nonEmptyString('an output file path'),
    html: nonEmptyString('an output file path'),
    deviceTrace: nonEmptyString('an output file path'),
    maxNumSeqs: engineSetting('maxNumSeqs'),
    maxBatchedTokens: engineSetting('maxNumBatchedTokens'),
    maxModelLen: engineSetting('maxModelLen'),
    computeNsPerToken: engineSetting('computeNsPerToken'),
    copyMethod: engineSetting('copyMethod'),
    gpu: engineSetting('gpu'),
    remote: engineSetting('remote'),
    remotePolicy: engineSetting('remotePolicy'),
    remoteTimeoutMs: engineSetting('remoteTimeoutMs'),
    remoteWriteAttempts: engineSetting('remoteWriteAttempts'),
    remoteRetryBackoffMs: engineSetting('remoteRetryBackoffMs'),
    remoteNamespace: engineSetting('remoteNamespace'),
    remoteSecretFile: engineSetting('remoteSecretFile'),
    remoteEncrypt: engineSetting('remoteEncrypt'),
    ...monitoringInputFields,
    ...kvEventsInputFields,
  })
  .partial()
  .strict();

type RunInput = z.output<typeof runInputSchema>;

export interface MultiturnRunWorkload {
  readonly kind: 'multiturn';
  readonly requests: number;
  readonly rounds: number;
  readonly seed: number;
}

export interface TraceRunWorkload {
  readonly kind: 'trace';
  readonly file: string;
  readonly maxRequests: number | null;
  /** Seconds into the trace, [start, end); end may be Infinity. */
  readonly timeWindow: readonly [number, number] | null;
  readonly tokenScale: number;
  readonly speedup: number;
  /** false: submit every request at time 0. */
  readonly arrivals: boolean;
}

export type RunWorkloadConfig = MultiturnRunWorkload | TraceRunWorkload;

export interface RunConfig {
  readonly backend: 'auto' | BackendName;
  /** 'auto': the CUDA device count with cuda, 2 on host (see resolveRunConfig). */
  readonly tp: number | 'auto';
  readonly model: ModelPresetName;
  readonly layout: KvLayout;
  readonly blockSize: number;
  readonly gpuBlocks: number;
  readonly offload: boolean;
  /** The CPU tier's size: exactly one of cpuBlocks and cpuBytes is set. */
  readonly cpuBlocks: number | null;
  readonly cpuBytes: number | null;
  readonly offloadFactor: number;
  readonly eviction: EvictionPolicyName;
  readonly storePolicy: StorePolicyName;
  readonly workload: RunWorkloadConfig;
  readonly faults: string | null;
  readonly faultSeed: number;
  readonly failurePolicy: FailurePolicy;
  readonly rankRestart: boolean;
  readonly stepDeadlineMs: number | null;
  /** How long a rank may take to open its device (at start and after a restart); null: the engine's default. */
  readonly startDeadlineMs: number | null;
  readonly compare: boolean;
  /** Where to write the JSON report, if anywhere. */
  readonly json: string | null;
  /** Where to write the HTML report, if anywhere. */
  readonly html: string | null;
  /** Where to write the device trace (Chrome Trace Event Format), if anywhere; with compare, the offload-on run's. */
  readonly deviceTrace: string | null;
  /** Engine limits; null leaves the engine's default. */
  readonly maxNumSeqs: number | null;
  readonly maxBatchedTokens: number | null;
  readonly maxModelLen: number | null;
  readonly computeNsPerToken: number | null;
  /** Transfer path on the CUDA backend; null leaves the engine's default (auto). */
  readonly copyMethod: CopyMethod | null;
  /** The GPU profile of the step clock; null: the CUDA device's own, else h100-sxm. */
  readonly gpu: GpuProfileName | null;
  /** The /metrics endpoint and the logs. */
  readonly monitoring: RunMonitoringConfig;
  /** Where KV events are published; null: nowhere. */
  readonly kvEvents: KvEventsConfig | null;
  /** The remote tier's engine keys (remote, remotePolicy, remoteTimeoutMs, remoteNamespace); null without --remote. */
  readonly remote: RemoteRunConfig | null;
}

export interface RemoteRunConfig {
  readonly remote: string;
  readonly remotePolicy?: 'write-through' | 'write-back';
  readonly remoteTimeoutMs?: number;
  readonly remoteWriteAttempts?: number;
  readonly remoteRetryBackoffMs?: number;
  readonly remoteNamespace?: string;
  readonly remoteSecretFile?: string;
  readonly remoteEncrypt?: boolean;
}

/** A RunConfig whose backend and rank count are decided. */
export type ResolvedRunConfig = RunConfig & { readonly backend: BackendName; readonly tp: number };

const TRACE_ONLY_KEYS = ['maxRequests', 'timeWindow', 'tokenScale', 'speedup', 'arrivals'] as const;
/** Settings of the CPU tier, which --no-offload turns off. */
const CPU_TIER_KEYS = ['cpuBlocks', 'cpuBytes', 'eviction', 'storePolicy', 'offloadFactor'] as const;
/** Keys a config file must give as JSON numbers (sizes and time windows may be strings, as flags are). */
const NUMBER_KEYS = [
  'tp',
  'blockSize',
  'gpuBlocks',
  'cpuBlocks',
  'offloadFactor',
  'requests',
  'rounds',
  'seed',
  'maxRequests',
  'tokenScale',
  'speedup',
  'faultSeed',
  'stepDeadlineMs',
  'startDeadlineMs',
  'maxNumSeqs',
  'maxBatchedTokens',
  'maxModelLen',
  'computeNsPerToken',
  'remoteTimeoutMs',
  'remoteWriteAttempts',
  'remoteRetryBackoffMs',
  'metricsPort',
  'metricsLingerMs',
  'slowStepMs',
] as const;
const MULTITURN_ONLY_KEYS = ['requests', 'rounds', 'seed'] as const;
/** Config file keys holding paths (relative to the file). */
const PATH_KEYS = ['trace', 'json', 'html', 'deviceTrace', 'remoteSecretFile'] as const;
/** Config keys naming files the run writes. */
const OUTPUT_KEYS = ['json', 'html', 'deviceTrace'] as const;

/**
 * Parses `kvtier run`'s arguments (without the program and command names).
 * Throws UsageError naming the flag or key for anything wrong; a CommanderError
 * with exit code 0 means help was printed.
 */
export function parseRunArgs(argv: readonly string[]): RunConfig {
  return runConfigFromCommand(parseCommandArgs(createRunCommand(), argv));
}

/** Builds the RunConfig from a parsed `run` command: its config file, then its flags. */
export function runConfigFromCommand(command: Command): RunConfig {
  const flags = flagInput(command, ['config']);
  const configFile = command.opts().config as string | undefined;
  const input = configFile === undefined ? flags : mergeInputs(readConfigFile(configFile, PATH_KEYS), flags);
  const config = buildRunConfig(input);
  const inputs = [...(configFile === undefined ? [] : [configFile]), ...(config.workload.kind === 'trace' ? [config.workload.file] : [])];
  for (const key of OUTPUT_KEYS) {
    const file = config[key];
    if (file !== null) checkNotAnInput(input, key, file, inputs);
  }
  const outputs = OUTPUT_KEYS.flatMap((key) => {
    const file = config[key];
    return file === null ? [] : [{ flag: originOf(input, key), file }];
  });
  checkOutputsApart(outputs, []);
  return config;
}

/** Validates layered input and applies defaults. */
export function buildRunConfig(input: LayeredInput): RunConfig {
  rejectStringNumbers(input, NUMBER_KEYS);
  const given = parseInput(runInputSchema, input);
  checkCombinations(given, input);
  const model = given.model ?? RUN_DEFAULTS.model;
  const tp = given.tp ?? 'auto';
  checkEngineRules(given, model, input);
  if (given.faults !== undefined) checkFaultPlan(given.faults, given.gpuBlocks ?? RUN_DEFAULTS.gpuBlocks, input);
  const hasCpuSize = given.cpuBlocks !== undefined || given.cpuBytes !== undefined;
  return {
    backend: given.backend ?? 'auto',
    tp,
    model,
    layout: given.layout ?? RUN_DEFAULTS.layout,
    blockSize: given.blockSize ?? RUN_DEFAULTS.blockSize,
    gpuBlocks: given.gpuBlocks ?? RUN_DEFAULTS.gpuBlocks,
    offload: given.offload ?? true,
    cpuBlocks: hasCpuSize ? (given.cpuBlocks ?? null) : RUN_DEFAULTS.cpuBlocks,
    cpuBytes: given.cpuBytes ?? null,
    offloadFactor: given.offloadFactor ?? RUN_DEFAULTS.offloadFactor,
    eviction: given.eviction ?? RUN_DEFAULTS.eviction,
    storePolicy: given.storePolicy ?? RUN_DEFAULTS.storePolicy,
    workload: workloadConfig(given),
    faults: given.faults ?? null,
    faultSeed: given.faultSeed ?? RUN_DEFAULTS.faultSeed,
    failurePolicy: given.failurePolicy ?? RUN_DEFAULTS.failurePolicy,
    rankRestart: given.rankRestart ?? false,
    stepDeadlineMs: given.stepDeadlineMs ?? null,
    startDeadlineMs: given.startDeadlineMs ?? null,
    compare: given.compare ?? false,
    json: given.json ?? null,
    html: given.html ?? null,
    deviceTrace: given.deviceTrace ?? null,
    maxNumSeqs: given.maxNumSeqs ?? null,
    maxBatchedTokens: given.maxBatchedTokens ?? null,
    maxModelLen: given.maxModelLen ?? null,
    computeNsPerToken: given.computeNsPerToken ?? null,
    copyMethod: given.copyMethod ?? null,
    gpu: given.gpu ?? null,
    monitoring: monitoringConfig(given, input),
    kvEvents: kvEventsConfig(given, input),
    remote: remoteRunConfig(given, input),
  };
}

/** The remote keys go to the engine as given; the URL and namespace are checked here so errors name the flag. */
function remoteRunConfig(given: RunInput, input: LayeredInput): RemoteRunConfig | null {
  const name = (key: string) => originOf(input, key);
  if (given.remote === undefined) {
    for (const key of ['remotePolicy', 'remoteTimeoutMs', 'remoteWriteAttempts', 'remoteRetryBackoffMs', 'remoteNamespace', 'remoteSecretFile', 'remoteEncrypt'] as const) {
      if (given[key] !== undefined) throw new UsageError(`${name(key)} configures the remote tier: add --remote URL`);
    }
    return null;
  }
  if (given.offload === false) throw new UsageError(`${name('remote')} sits behind the CPU tier, but ${name('offload')} turns it off; drop one of them`);
  try {
    parseRemoteUrl(given.remote, name('remote'));
    if (given.remoteNamespace !== undefined) checkNamespaceName(given.remoteNamespace, name('remoteNamespace'));
    // Read here so a missing or short secret is refused naming the flag; the engine reads it again.
    if (given.remoteSecretFile !== undefined) {
      checkRemoteSecret(readSecretFile(given.remoteSecretFile, name('remoteSecretFile')), name('remoteSecretFile'));
    } else if (given.remoteEncrypt === true && !process.env[REMOTE_SECRET_ENV]) {
      throw new UsageError(`${name('remoteEncrypt')} needs a secret: give --remote-secret-file or set ${REMOTE_SECRET_ENV}`);
    }
  } catch (error) {
    if (error instanceof RemoteConfigError) throw new UsageError(error.message);
    throw error;
  }
  return {
    remote: given.remote,
    ...(given.remotePolicy !== undefined ? { remotePolicy: given.remotePolicy as 'write-through' | 'write-back' } : {}),
    ...(given.remoteTimeoutMs !== undefined ? { remoteTimeoutMs: given.remoteTimeoutMs } : {}),
    ...(given.remoteWriteAttempts !== undefined ? { remoteWriteAttempts: given.remoteWriteAttempts } : {}),
    ...(given.remoteRetryBackoffMs !== undefined ? { remoteRetryBackoffMs: given.remoteRetryBackoffMs } : {}),
    ...(given.remoteNamespace !== undefined ? { remoteNamespace: given.remoteNamespace } : {}),
    ...(given.remoteSecretFile !== undefined ? { remoteSecretFile: given.remoteSecretFile } : {}),
    ...(given.remoteEncrypt !== undefined ? { remoteEncrypt: given.remoteEncrypt } : {}),
  };
}

function workloadConfig(given: RunInput): RunWorkloadConfig {
  if (given.trace !== undefined) {
    return {
      kind: 'trace',
      file: given.trace,
      maxRequests: given.maxRequests ?? null,
      timeWindow: given.timeWindow ?? null,
      tokenScale: given.tokenScale ?? 1,
      speedup: given.speedup ?? 1,
      arrivals: given.arrivals ?? true,
    };
  }
  return {
    kind: 'multiturn',
    requests: given.requests ?? MULTITURN_DEFAULTS.requests,
    rounds: given.rounds ?? MULTITURN_DEFAULTS.rounds,
    seed: given.seed ?? MULTITURN_DEFAULTS.seed,
  };
}

/** Settings that are each valid but do not go together. */
function checkCombinations(given: RunInput, input: LayeredInput): void {
  const name = (key: string) => originOf(input, key);
  const conflict = (message: string): never => {
    throw new UsageError(message);
  };
  rejectBoth(input, 'cpuBlocks', 'cpuBytes', 'size the CPU tier');
  if (given.workload === 'trace' && given.trace === undefined) conflict(`${name('workload')} trace needs --trace FILE`);
  if (given.workload === 'multiturn' && given.trace !== undefined) {
    conflict(`${name('trace')} replays a trace, but ${name('workload')} asks for multiturn`);
  }
  const isTrace = given.trace !== undefined;
  for (const key of TRACE_ONLY_KEYS) {
    if (!isTrace && given[key] !== undefined) conflict(`${name(key)} applies to trace replay only (add --trace FILE)`);
  }
  for (const key of MULTITURN_ONLY_KEYS) {
    if (isTrace && given[key] !== undefined) {
      conflict(`${name(key)} applies to the multiturn workload only; a trace fixes its own requests (see --max-requests)`);
    }
  }
  if (given.speedup !== undefined && given.arrivals === false) {
    conflict(`${name('speedup')} and ${name('arrivals')} do not go together: without arrivals there is nothing to speed up`);
  }
  if (given.compare === true && given.offload === false) {
    conflict(`${name('compare')} runs with offloading off and then on; drop ${name('offload')}`);
  }
  if (given.offload === false) {
    for (const key of CPU_TIER_KEYS) {
      if (given[key] !== undefined) conflict(`${name(key)} sets up the CPU tier, but ${name('offload')} turns it off; drop one of them`);
    }
  }
}

/** The engine's rules across settings (src/config/engine-rules.ts), on what this run gives the engine. */
function checkEngineRules(given: RunInput, model: ModelPresetName, input: LayeredInput): void {
  const issue = engineRuleIssue({
    model: MODEL_PRESETS[model],
    tp: given.tp,
    blockSize: given.blockSize ?? RUN_DEFAULTS.blockSize,
    gpuBlocks: given.gpuBlocks ?? RUN_DEFAULTS.gpuBlocks,
    maxModelLen: given.maxModelLen,
    offloadFactor: given.offloadFactor ?? RUN_DEFAULTS.offloadFactor,
    cpuBytes: given.offload === false ? undefined : given.cpuBytes,
  });
  if (issue !== null) throw settingError(input, issue);
}

/** Parses the plan now, so a typo or a block the pool lacks fails before any rank starts, naming the flag or key. */
function checkFaultPlan(plan: string, gpuBlocks: number, input: LayeredInput): void {
  try {
    validateFaultPlanBlocks(parseFaultPlan(plan), gpuBlocks);
  } catch (err) {
    if (err instanceof FaultPlanError) throw invalidValue(input, 'faults', err.message.replace(/^fault plan: /, ''));
    throw err;
  }
}

/**
 * Decides the backend and rank count. `cudaDeviceCount` comes from the
 * device layer at run time (0 without CUDA). With cuda and no --tp, tp is the
 * device count, lowered to the largest count that divides the model's KV
 * heads (the tiny model has 4 heads, so 8 GPUs run it with tp 4). A fault
 * plan naming a rank beyond the decided count is a UsageError.
 */
export function resolveRunConfig(config: RunConfig, cudaDeviceCount: number): ResolvedRunConfig {
  const backend: BackendName = config.backend === 'auto' ? (cudaDeviceCount > 0 ? 'cuda' : 'host') : config.backend;
  if (backend === 'cuda' && cudaDeviceCount === 0) {
    throw new ConfigError('backend "cuda" was requested but no CUDA device was found (use --backend host)');
  }
  const tp = config.tp === 'auto' ? autoTp(config.model, backend, cudaDeviceCount) : config.tp;
  if (config.faults !== null) checkFaultRanks(config.faults, tp);
  return { ...config, backend, tp };
}

function autoTp(model: ModelPresetName, backend: BackendName, cudaDeviceCount: number): number {
  const heads = MODEL_PRESETS[model].kvHeads;
  let tp = backend === 'cuda' ? cudaDeviceCount : RUN_DEFAULTS.hostTp;
  while (heads % tp !== 0) tp--;
  return tp;
}

/** A fault plan naming a rank the run does not have is bad input, not a failure of the run. */
function checkFaultRanks(plan: string, tp: number): void {
  try {
    validateFaultPlanRanks(parseFaultPlan(plan), tp);
  } catch (err) {
    if (err instanceof FaultPlanError) throw new UsageError(err.message);
    throw err;
  }
}

/** The engine configuration for one run, with offloading on or off (--compare runs both). */
export function toEngineConfig(config: ResolvedRunConfig, options: { offload: boolean }): EngineConfigInput {
  const engine: EngineConfigInput = {
    model: config.model,
    tp: config.tp,
    backend: config.backend,
    layout: config.layout,
    blockSize: config.blockSize,
    gpuBlocks: config.gpuBlocks,
    offload: options.offload,
    failurePolicy: config.failurePolicy,
    faultSeed: config.faultSeed,
    rankRestart: config.rankRestart,
  };
  if (options.offload) {
    if (config.cpuBytes !== null) engine.cpuBytes = config.cpuBytes;
    else if (config.cpuBlocks !== null) engine.cpuBlocks = config.cpuBlocks;
    engine.offloadFactor = config.offloadFactor;
    engine.eviction = config.eviction;
    engine.storePolicy = config.storePolicy;
  }
  if (config.faults !== null) engine.faults = config.faults;
  if (config.stepDeadlineMs !== null) engine.stepDeadlineMs = config.stepDeadlineMs;
  if (config.startDeadlineMs !== null) engine.startDeadlineMs = config.startDeadlineMs;
  if (config.maxNumSeqs !== null) engine.maxNumSeqs = config.maxNumSeqs;
  if (config.maxBatchedTokens !== null) engine.maxNumBatchedTokens = config.maxBatchedTokens;
  if (config.maxModelLen !== null) engine.maxModelLen = config.maxModelLen;
  if (config.computeNsPerToken !== null) engine.computeNsPerToken = config.computeNsPerToken;
  if (config.copyMethod !== null) engine.copyMethod = config.copyMethod;
  if (config.gpu !== null) engine.gpu = config.gpu;
  if (options.offload && config.remote !== null) Object.assign(engine, config.remote);
  return engine;
}
