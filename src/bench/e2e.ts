import type { GpuProfileName } from '../timing/gpu-profiles.js';
import { analyzeLoadedTrace } from '../analysis/analyze.js';
import { IntegrityChecker } from '../report/integrity.js';
import { buildRunReport, type RunReport } from '../report/report.js';
import { runConfiguration } from '../report/run-configuration.js';
import { checkIntegerAtLeast } from './stats.js';
import { DEFAULT_MODEL, ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { ConfigError, EngineError } from '../core/errors.js';
import type { BackendName, KvLayout } from '../device/types.js';
import { Engine } from '../runtime/engine.js';
import { resolveEngineConfig } from '../runtime/engine-config.js';
import type { EngineConfigInput, EvictionPolicyName, FinishedRequest, StorePolicyName } from '../runtime/engine-types.js';
import { loadTrace, type Trace } from '../workload/trace.js';
import { driveWorkload } from '../workload/drive.js';
import { TraceWorkload } from '../workload/trace-workload.js';

/**
 * The end-to-end bench (docs/architecture.md, "Benchmarks"): a slice of a Mooncake trace
 * through the Engine twice, with the CPU tier off and then on, on the same
 * loaded trace. Each row reports the prefill tokens the ranks computed, the
 * GPU prefix and CPU-tier hit tokens, TTFT percentiles and throughput; the
 * GPU and CPU hits together are set against the GPU+CPU optimum `kvtier
 * analyze` computes for the same slice, capacity and block geometry (Belady
 * MIN of one cache, no GPU tier in front), and every finished request is
 * checked against the reference model.
 *
 * Requests are fed by arrival as `kvtier run` feeds them: open loop, at
 * their trace timestamps divided by `speedup` (or all at once with
 * arrivals off), so TTFT includes the time a request queued.
 */

export interface E2eBenchOptions {
  readonly backend: BackendName;
  readonly traceFile: string;
  /** Requests taken from the start of the trace. */
  readonly maxRequests: number;
  /** Trace lengths are divided by this (a divisor of 512). */
  readonly tokenScale: number;
  /** false: every request arrives at time 0. Default true. */
  readonly arrivals?: boolean;
  /** Arrival times are divided by this (default 1). */
  readonly speedup?: number;
  readonly model?: string;
  readonly tp: number;
  readonly layout?: KvLayout;
  readonly blockSize: number;
  readonly gpuBlocks: number;
  /** CPU tier capacity in offloaded blocks (the GPU+CPU optimum is computed at the same capacity). */
  readonly cpuBlocks: number;
  readonly offloadFactor?: number;
  readonly eviction?: EvictionPolicyName;
  readonly storePolicy?: StorePolicyName;
  readonly maxNumSeqs?: number;
  readonly maxNumBatchedTokens?: number;
  /** The step clock's GPU profile (default: the CUDA device's own, else h100-sxm). */
  readonly gpu?: GpuProfileName;
  /** Check every finished request against the reference model (default true). */
  readonly verify?: boolean;
  /** Called when each run finished. */
  readonly onRow?: (row: E2eBenchRow) => void;
}

export interface E2eBenchRow {
  readonly offload: boolean;
  readonly model: string;
  readonly tp: number;
  readonly requests: number;
  /** Requests that ran to completion. */
  readonly finished: number;
  readonly promptTokens: number;
  readonly prefillTokensComputed: number;
  readonly gpuPrefixHitTokens: number;
  readonly cpuHitTokens: number;
  /**
   * The GPU+CPU optimum at the same capacity (`kvtier analyze`: one cache, no
   * GPU tier in front), and this run's GPU prefix and CPU-tier hits together
   * as a share of it.
   */
  readonly gpuCpuOptimalHitTokens: number;
  readonly hitShareOfGpuCpuOptimal: number;
  readonly ttftP50Ms: number | null;
  readonly ttftP99Ms: number | null;
  readonly outputTokensPerSecond: number;
  readonly requestsPerSecond: number;
  readonly wallSeconds: number;
  readonly preemptions: number;
  /** Requests compared with the reference model, and how many differed (null when not verified). */
  readonly verified: number | null;
  readonly mismatches: number | null;
  /** The run's configuration, for the record. */
  readonly gpuBlocks: number;
  readonly cpuBlocks: number;
  readonly tokenScale: number;
  readonly speedup: number | null;
  /** The step clock the run kept (model on GPU profile), as its report names it. */
  readonly stepClock: string;
}

export async function runE2eBench(options: E2eBenchOptions): Promise<E2eBenchRow[]> {
  checkOptions(options);
  const trace = await loadTrace(options.traceFile, { maxRequests: options.maxRequests, tokenScale: options.tokenScale });
  if (trace.records.length === 0) throw new ConfigError(`e2e bench: ${options.traceFile} holds no requests`);
  checkRequestLengths(trace, resolveEngineConfig(engineConfig(options, false)).maxModelLen);
  const optimum = analyzeLoadedTrace(trace, {
    cpuBlocks: options.cpuBlocks,
    blockSize: options.blockSize,
    offloadFactor: options.offloadFactor ?? ENGINE_DEFAULTS.offloadFactor,
  }).gpuCpuOptimum.hitTokens;
  const rows: E2eBenchRow[] = [];
  for (const offload of [false, true]) {
    const report = await replay(options, trace, offload);
    const failure = runFailure(report);
    if (failure !== null) throw new EngineError(`e2e bench: the run with offload ${offload ? 'on' : 'off'} failed: ${failure}`);
    const row = toRow(options, report, optimum);
    rows.push(row);
    options.onRow?.(row);
  }
  return rows;
}

/** A request the engine would refuse would stop the replay midway: refuse the slice before any rank starts. */
function checkRequestLengths(trace: Trace, maxModelLen: number): void {
  const tooLong = trace.records.find((r) => r.inputLength + r.outputLength > maxModelLen);
  if (tooLong === undefined) return;
  throw new ConfigError(
    `${trace.file}:${tooLong.line}: input_length + output_length is ${tooLong.inputLength + tooLong.outputLength} tokens ` +
      `after --token-scale ${trace.tokenScale}, over the engine's limit of ${maxModelLen} ` +
      '(raise --gpu-blocks or --block-size, or replay with a larger --token-scale)',
  );
}

function checkOptions(o: E2eBenchOptions): void {
  const atLeast = (name: string, value: number | undefined, min: number) => checkIntegerAtLeast('e2e', name, value, min);
  atLeast('maxRequests', o.maxRequests, 1);
  atLeast('tokenScale', o.tokenScale, 1);
  // The run with offloading on needs a CPU tier (the engine takes 0 as none).
  atLeast('cpuBlocks', o.cpuBlocks, 1);
  if (o.speedup !== undefined && !(o.speedup > 0 && Number.isFinite(o.speedup))) {
    throw new ConfigError(`e2e bench: speedup = ${String(o.speedup)} must be a number > 0`);
  }
  if (o.arrivals === false && o.speedup !== undefined) {
    throw new ConfigError('e2e bench: speedup and arrivals off do not go together: without arrivals there is nothing to speed up');
  }
  // The engine's settings, by the engine's own schema and rules.
  resolveEngineConfig(engineConfig(o, true));
}

function engineConfig(o: E2eBenchOptions, offload: boolean): EngineConfigInput {
  const config: EngineConfigInput = {
    model: o.model ?? DEFAULT_MODEL,
    tp: o.tp,
    backend: o.backend,
    layout: o.layout ?? ENGINE_DEFAULTS.layout,
    blockSize: o.blockSize,
    gpuBlocks: o.gpuBlocks,
    offload,
  };
  if (offload) {
    config.cpuBlocks = o.cpuBlocks;
    config.offloadFactor = o.offloadFactor ?? ENGINE_DEFAULTS.offloadFactor;
    config.eviction = o.eviction ?? 'lru';
    config.storePolicy = o.storePolicy ?? ENGINE_DEFAULTS.storePolicy;
  }
  if (o.maxNumSeqs !== undefined) config.maxNumSeqs = o.maxNumSeqs;
  if (o.maxNumBatchedTokens !== undefined) config.maxNumBatchedTokens = o.maxNumBatchedTokens;
  if (o.gpu !== undefined) config.gpu = o.gpu;
  return config;
}

/** One pass over the trace slice; the report of `kvtier run` for it. */
export async function replay(options: E2eBenchOptions, trace: Trace, offload: boolean): Promise<RunReport> {
  const engine = await Engine.create(engineConfig(options, offload));
  const finished: FinishedRequest[] = [];
  const integrity = options.verify === false ? null : new IntegrityChecker(engine.config.model);
  let wallSeconds = 0;
  try {
    const workload = new TraceWorkload(trace, {
      vocabSize: engine.config.model.vocabSize,
      speedup: options.speedup,
      arrivals: options.arrivals,
    });
    const drive = await driveWorkload(engine, workload, (f) => {
      finished.push(f);
      integrity?.add(f);
    });
    if (drive.stopped !== null) {
      throw new EngineError(`e2e bench: the engine stopped: ${drive.stopped.message}`, { cause: drive.stopped });
    }
    wallSeconds = drive.wallSeconds;
  } catch (error) {
    // Stops the checker's pool before giving up.
    await integrity?.finish().catch(() => {});
    throw error;
  } finally {
    await engine.shutdown();
  }
  const summary = integrity === null ? { checked: 0, mismatches: 0, examples: [] } : await integrity.finish();
  const metrics = engine.metrics();
  return buildRunReport({
    finished,
    metrics,
    integrity: summary,
    wallSeconds,
    backend: engine.backend,
    tp: engine.config.tp,
    offload,
    workload: `trace ${trace.file}`,
    configuration: runConfiguration(engine.config, engine.gpu, metrics.stepClock.description),
  });
}

/** Why a run's figures cannot be trusted, or null. */
export function runFailure(report: RunReport): string | null {
  if (report.requests.failed > 0) return `${report.requests.failed} requests failed (${report.errors.join('; ')})`;
  if (report.integrity.mismatches > 0) {
    return `${report.integrity.mismatches} of ${report.integrity.checked} requests differ from the reference model`;
  }
  if (report.leaks.gpuBlocks > 0 || report.leaks.cpuBlocks > 0) {
    return `blocks leaked: ${report.leaks.gpuBlocks} GPU, ${report.leaks.cpuBlocks} CPU`;
  }
  return null;
}

function toRow(options: E2eBenchOptions, report: RunReport, optimum: number): E2eBenchRow {
  return {
    offload: report.offload,
    model: options.model ?? DEFAULT_MODEL,
    tp: report.tp,
    requests: report.requests.total,
    finished: report.requests.finished,
    promptTokens: report.tokens.prompt,
    prefillTokensComputed: report.tokens.prefillComputed,
    gpuPrefixHitTokens: report.hits.gpuPrefixTokens,
    cpuHitTokens: report.hits.cpuTierTokens,
    gpuCpuOptimalHitTokens: optimum,
    hitShareOfGpuCpuOptimal: optimum === 0 ? 0 : (report.hits.gpuPrefixTokens + report.hits.cpuTierTokens) / optimum,
    ttftP50Ms: report.latency.ttftMs.p50,
    ttftP99Ms: report.latency.ttftMs.p99,
    outputTokensPerSecond: report.throughput.outputTokensPerSecond,
    requestsPerSecond: report.throughput.requestsPerSecond,
    wallSeconds: report.wallSeconds,
    preemptions: report.preemptions,
    verified: options.verify === false ? null : report.integrity.checked,
    mismatches: options.verify === false ? null : report.integrity.mismatches,
    gpuBlocks: options.gpuBlocks,
    cpuBlocks: options.cpuBlocks,
    tokenScale: options.tokenScale,
    speedup: options.arrivals === false ? null : (options.speedup ?? 1),
    stepClock: report.clock.description,
  };
}
