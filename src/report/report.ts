import type { EngineMetrics, FinishedRequest, TransferCounters } from '../runtime/engine-types.js';
import type { RemoteTierMetrics } from '../remote/remote-stats.js';
import type { IntegritySummary } from './integrity.js';
import { summarizePercentiles, type Percentiles } from './percentiles.js';
import { summarizeReplayLoad, type ReplayedRequestTimes, type ReplayLoad } from './replay-load.js';
import type { RunConfiguration } from './run-configuration.js';

/**
 * The report of one `kvtier run`: what the engine counted, latency
 * percentiles from the finished requests, and the integrity check.
 *
 * Transfer rates: `gbps` is bytes over the transfers' busy time (the summed
 * device time of the jobs), i.e. the rate the link delivered while copying;
 * `avgGbps` is bytes over the run's wall time, i.e. the average load the
 * transfers put on the link. GB is 1e9 bytes.
 */

export interface TransferReport {
  readonly jobs: number;
  readonly failedJobs: number;
  readonly bytes: number;
  /** Link rate: bytes / busy time, GB/s (null without transfers). */
  readonly gbps: number | null;
  /** Average over the run: bytes / wall time, GB/s. */
  readonly avgGbps: number | null;
  /** Copy jobs each rank's device ran, on average over ranks (one may carry several jobs). */
  readonly copyJobsPerRank: number;
  /** Mean bytes of one copy job on one rank (null without copy jobs). */
  readonly meanCopyJobBytes: number | null;
}

export interface RunReport {
  readonly requests: { readonly total: number; readonly finished: number; readonly failed: number; readonly aborted: number };
  /** See EngineMetrics.tokens: gpu + cpu hits + prefillComputed = promptReached + recomputed. */
  readonly tokens: {
    readonly prompt: number;
    readonly output: number;
    readonly prefillComputed: number;
    readonly recomputed: number;
    readonly promptReached: number;
  };
  /** Prompt tokens served by each tier the first time their request reached them. */
  readonly hits: { readonly gpuPrefixTokens: number; readonly cpuTierTokens: number };
  /** Tokens served again by each tier to a request that had reached them before (not hits). */
  readonly rereads: { readonly gpuPrefixTokens: number; readonly cpuTierTokens: number };
  /** The remote tier's counters; absent without one. */
  readonly remote?: RemoteTierMetrics;
  readonly transfers: { readonly gpuToCpu: TransferReport; readonly cpuToGpu: TransferReport };
  readonly preemptions: number;
  readonly loadFailures: { readonly blocks: number; readonly requestsRecovered: number };
  readonly rankRestarts: number;
  readonly integrity: { readonly checked: number; readonly mismatches: number; readonly examples: IntegritySummary['examples'] };
  readonly leaks: { readonly gpuBlocks: number; readonly cpuBlocks: number };
  readonly latency: { readonly ttftMs: Percentiles; readonly tpotMs: Percentiles };
  readonly wallSeconds: number;
  readonly backend: string;
  readonly tp: number;
  /** Whether the CPU tier was on. */
  readonly offload: boolean;
  readonly throughput: { readonly requestsPerSecond: number; readonly outputTokensPerSecond: number; readonly promptTokensPerSecond: number };
  readonly workload: string | null;
  /** Distinct error messages of failed requests (at most a few). */
  readonly errors: readonly string[];
  /** The step clock: what it priced steps as, and how far the forwards' wall time ran past the modelled compute. */
  readonly clock: ClockReport;
  /** How loaded the run was: its span over its arrivals' span, and how long requests queued. */
  readonly load: ReplayLoad;
  /** The configuration the run resolved to (model, pools, tiers, policies, GPU profile, step clock); null when not given. */
  readonly configuration: RunConfiguration | null;
}

export interface ClockReport {
  /** "llama-8b on h100-sxm (NVIDIA H100 SXM 80GB, default)", or a flat cost per token. */
  readonly description: string;
  readonly modelledComputeMs: number;
  /** Wall time of the forwards (slowest rank per step). */
  readonly forwardMs: number;
  /**
   * forwardMs / modelledComputeMs - 1: on the host backend, its own work per
   * step (null when nothing was modelled). A run whose forwards ran far past
   * the model reports latencies that are slow by about that much.
   */
  readonly overrun: number | null;
}

/** Past this overrun a report warns that the host's own work stretched the clock. */
export const CLOCK_OVERRUN_WARNING = 0.1;

function timesOf(f: FinishedRequest): ReplayedRequestTimes {
  return {
    arrivalMs: f.arrivalMs,
    firstScheduledMs: f.firstScheduledMs ?? f.finishMs,
    firstTokenMs: f.firstTokenMs ?? f.finishMs,
    finishMs: f.finishMs,
    outputTokens: f.outputTokens.length,
  };
}

function clockReport(metrics: EngineMetrics): ClockReport {
  const { description, modelledComputeMs, forwardMs } = metrics.stepClock;
  return { description, modelledComputeMs, forwardMs, overrun: modelledComputeMs > 0 ? forwardMs / modelledComputeMs - 1 : null };
}

export interface RunReportInput {
  readonly finished: readonly FinishedRequest[];
  readonly metrics: EngineMetrics;
  readonly integrity: Pick<IntegritySummary, 'checked' | 'mismatches' | 'examples'>;
  readonly wallSeconds: number;
  readonly backend: string;
  readonly tp: number;
  readonly offload: boolean;
  readonly workload?: string;
  readonly configuration?: RunConfiguration;
}

const MAX_ERRORS = 5;

function completed(f: FinishedRequest): boolean {
  return f.finishReason === 'length' || f.finishReason === 'stopped';
}

function transferReport(counters: TransferCounters, wallSeconds: number, tp: number): TransferReport {
  const gb = counters.bytes / 1e9;
  return {
    jobs: counters.jobs,
    failedJobs: counters.failedJobs,
    bytes: counters.bytes,
    gbps: counters.busyMs > 0 ? gb / (counters.busyMs / 1000) : null,
    avgGbps: wallSeconds > 0 && counters.jobs > 0 ? gb / wallSeconds : null,
    copyJobsPerRank: counters.copyJobs / Math.max(1, tp),
    meanCopyJobBytes: counters.copyJobs > 0 ? counters.bytes / counters.copyJobs : null,
  };
}

/**
 * TTFT = firstTokenMs - arrivalMs; TPOT = (finishMs - firstTokenMs) /
 * (outputs - 1), for requests with at least two outputs. Both over requests
 * that ran to completion.
 */
export function buildRunReport(input: RunReportInput): RunReport {
  const { finished, metrics, wallSeconds } = input;
  const ttft: number[] = [];
  const tpot: number[] = [];
  const errors = new Set<string>();
  let done = 0;
  let failed = 0;
  let aborted = 0;
  for (const f of finished) {
    if (f.finishReason === 'aborted') aborted++;
    if (f.finishReason === 'error') {
      failed++;
      if (f.errorMessage !== null && errors.size < MAX_ERRORS) errors.add(f.errorMessage);
    }
    if (!completed(f)) continue;
    done++;
    if (f.firstTokenMs === null) continue;
    ttft.push(f.firstTokenMs - f.arrivalMs);
    if (f.outputTokens.length >= 2) tpot.push((f.finishMs - f.firstTokenMs) / (f.outputTokens.length - 1));
  }
  const perSecond = (x: number) => (wallSeconds > 0 ? x / wallSeconds : 0);
  return {
    requests: { total: Math.max(metrics.requests.added, finished.length), finished: done, failed, aborted },
    tokens: { ...metrics.tokens },
    hits: { ...metrics.hits },
    rereads: { ...metrics.rereads },
    ...(metrics.remote ? { remote: metrics.remote } : {}),
    transfers: {
      gpuToCpu: transferReport(metrics.transfers.gpuToCpu, wallSeconds, input.tp),
      cpuToGpu: transferReport(metrics.transfers.cpuToGpu, wallSeconds, input.tp),
    },
    preemptions: metrics.preemptions,
    loadFailures: { ...metrics.loadFailures },
    rankRestarts: metrics.rankRestarts,
    integrity: { checked: input.integrity.checked, mismatches: input.integrity.mismatches, examples: input.integrity.examples },
    leaks: { ...metrics.leaks },
    latency: { ttftMs: summarizePercentiles(ttft), tpotMs: summarizePercentiles(tpot) },
    wallSeconds,
    backend: input.backend,
    tp: input.tp,
    offload: input.offload,
    throughput: {
      requestsPerSecond: perSecond(done),
      outputTokensPerSecond: perSecond(metrics.tokens.output),
      promptTokensPerSecond: perSecond(metrics.tokens.prompt),
    },
    workload: input.workload ?? null,
    errors: [...errors],
    clock: clockReport(metrics),
    load: summarizeReplayLoad(metrics.stepClock.description, finished.filter(completed).map(timesOf), metrics.preemptions),
    configuration: input.configuration ?? null,
  };
}
