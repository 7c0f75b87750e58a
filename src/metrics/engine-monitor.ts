import type { JobResult, RankStepOutput, SchedulerOutput, TransferDirection } from '../protocol/step-protocol.js';
import type { Request } from '../scheduler/request.js';
import {
  PREEMPTION_CAUSES,
  type LookupTier,
  type PreemptionCause,
  type SchedulerObserver,
} from '../scheduler/scheduler-observer.js';
import { Histogram, LATENCY_BUCKETS_SECONDS, LOOKUP_BUCKETS_SECONDS, TRANSFER_BUCKETS_SECONDS } from './histogram.js';

/**
 * Why a block load failed: the fault plan injected it, the device reported
 * an error, or (reserved for a remote tier) the remote store failed to serve
 * it. The local tiers never produce 'remote'; it is exported at 0 so
 * dashboards can name it already.
 */
export type LoadFailureCause = 'injected' | 'device' | 'remote';
export const LOAD_FAILURE_CAUSES: readonly LoadFailureCause[] = ['injected', 'device', 'remote'];

export type JobOutcome = 'ok' | 'failed';

/** One labelled series of a histogram metric. */
export interface HistogramSeries {
  readonly labels: Readonly<Record<string, string>>;
  readonly histogram: Histogram;
}

/** Prometheus label value of a transfer direction. */
export function directionLabel(direction: TransferDirection): string {
  return direction === 'gpuToCpu' ? 'gpu_to_cpu' : 'cpu_to_gpu';
}

const latency = () => new Histogram(LATENCY_BUCKETS_SECONDS);
const transfer = () => new Histogram(TRANSFER_BUCKETS_SECONDS);

/**
 * The engine's raw observations for monitoring: latency histograms, transfer
 * jobs in flight, preemptions and load failures by cause. Everything is a
 * plain number or a Histogram updated in place; nothing is formatted or
 * allocated per observation, and a Prometheus registry reads it at scrape
 * time (see createMetricsRegistry).
 */
export class EngineMonitor implements SchedulerObserver {
  /** Request latencies (seconds), recorded when a request finishes. */
  readonly timeToFirstToken = latency();
  readonly timePerOutputToken = latency();
  readonly endToEnd = latency();
  readonly queueTime = latency();
  /** Wall time of a whole engine step: schedule, every rank, merge, update. */
  readonly stepTime = latency();
  /** Time each rank spent in the step, by rank. */
  readonly rankStepTime: Histogram[] = [];
  readonly transferTime: Record<TransferDirection, Record<JobOutcome, Histogram>> = {
    gpuToCpu: { ok: transfer(), failed: transfer() },
    cpuToGpu: { ok: transfer(), failed: transfer() },
  };
  readonly lookupTime: Record<LookupTier, Histogram> = {
    gpu_prefix: new Histogram(LOOKUP_BUCKETS_SECONDS),
    cpu: new Histogram(LOOKUP_BUCKETS_SECONDS),
  };
  readonly preemptions: Record<PreemptionCause, number> = { out_of_blocks: 0, rank_loss: 0 };
  /** Block loads that failed, by cause: GPU block loads summed over ranks (injected, device), and blocks whose remote read failed, once each (remote). */
  readonly loadFailedBlocks: Record<LoadFailureCause, number> = { injected: 0, device: 0, remote: 0 };
  /** Transfer jobs scheduled and not yet finished on every rank. */
  readonly jobsInFlight: Record<TransferDirection, number> = { gpuToCpu: 0, cpuToGpu: 0 };

  constructor(tp = 1) {
    for (let rank = 0; rank < tp; rank++) this.rankStepTime.push(latency());
  }

  // ---------------------------------------------------------- scheduler side

  requestFinished(request: Request): void {
    const finish = request.finishTime;
    if (finish === null) return;
    this.endToEnd.observeMs(Math.max(0, finish - request.arrivalTime));
    if (request.firstScheduledTime !== null) this.queueTime.observeMs(Math.max(0, request.firstScheduledTime - request.arrivalTime));
    const first = request.firstTokenTime;
    if (first === null) return;
    this.timeToFirstToken.observeMs(Math.max(0, first - request.arrivalTime));
    const outputs = request.numOutputTokens;
    if (outputs > 1) this.timePerOutputToken.observeMs(Math.max(0, finish - first) / (outputs - 1));
  }

  requestsPreempted(cause: PreemptionCause, count: number): void {
    this.preemptions[cause] += count;
  }

  lookupTimed(tier: LookupTier, ms: number): void {
    this.lookupTime[tier].observeMs(ms);
  }

  /**
   * The step clock's modelled compute against the forwards' wall time
   * (slowest rank): on the host backend the difference is the backend's own
   * work, which stretches steps beyond what the model says.
   */
  readonly computeClock = { modelledMs: 0, forwardMs: 0, forwardSteps: 0 };

  // ------------------------------------------------------------- engine side

  /** Remote reads that failed count as load failures with cause `remote`. */
  remoteReadsFailed(blocks: number): void {
    this.loadFailedBlocks.remote += blocks;
  }

  /** The scheduler built a step: its transfer jobs are in flight from now on. */
  stepScheduled(output: SchedulerOutput): void {
    if (output.computeNs !== undefined) this.computeClock.modelledMs += output.computeNs / 1e6;
    const offload = output.offload;
    if (offload === null) return;
    this.jobsInFlight.gpuToCpu += offload.stores.length;
    this.jobsInFlight.cpuToGpu += offload.loads.length;
  }

  /** Every rank answered the step; `finishedJobs` are the jobs every rank has now reported. */
  stepAnswered(outputs: readonly RankStepOutput[], finishedJobs: readonly JobResult[]): void {
    let slowestForwardMs = 0;
    for (const out of outputs) slowestForwardMs = Math.max(slowestForwardMs, out.forwardMs);
    if (slowestForwardMs > 0) {
      this.computeClock.forwardMs += slowestForwardMs;
      this.computeClock.forwardSteps += 1;
    }
    for (const out of outputs) {
      let histogram = this.rankStepTime[out.rank];
      if (histogram === undefined) {
        while (this.rankStepTime.length <= out.rank) this.rankStepTime.push(latency());
        histogram = this.rankStepTime[out.rank];
      }
      histogram.observeMs(out.stepMs);
      let failed = 0;
      for (const job of out.connector.finishedJobs) failed += job.failedGpuBlockIds.length;
      if (failed > 0) {
        const injected = Math.min(failed, out.injectedLoadFailures ?? 0);
        this.loadFailedBlocks.injected += injected;
        this.loadFailedBlocks.device += failed - injected;
      }
    }
    for (const job of finishedJobs) {
      this.transferTime[job.direction][job.ok ? 'ok' : 'failed'].observeMs(job.elapsedMs);
      this.jobsInFlight[job.direction] = Math.max(0, this.jobsInFlight[job.direction] - 1);
    }
  }

  /** The step ended after `wallMs` milliseconds. */
  stepFinished(wallMs: number): void {
    this.stepTime.observeMs(wallMs);
  }

  /** Every rank dropped its transfers (rank-loss reset or engine stop). */
  transfersDropped(): void {
    this.jobsInFlight.gpuToCpu = 0;
    this.jobsInFlight.cpuToGpu = 0;
  }

  // ----------------------------------------------------------------- reading
  // Series lists are built once and reused: a registry caches the text of each labels object.

  private rankSeries: HistogramSeries[] = [];
  private readonly transfers: readonly HistogramSeries[] = (['gpuToCpu', 'cpuToGpu'] as const).flatMap((direction) =>
    (['ok', 'failed'] as const).map((outcome) => ({
      labels: Object.freeze({ direction: directionLabel(direction), outcome }),
      histogram: this.transferTime[direction][outcome],
    })),
  );
  private readonly lookups: readonly HistogramSeries[] = (['gpu_prefix', 'cpu'] as const).map((tier) => ({
    labels: Object.freeze({ tier }),
    histogram: this.lookupTime[tier],
  }));

  rankStepSeries(): readonly HistogramSeries[] {
    if (this.rankSeries.length !== this.rankStepTime.length) {
      this.rankSeries = this.rankStepTime.map((histogram, rank) => ({ labels: Object.freeze({ rank: String(rank) }), histogram }));
    }
    return this.rankSeries;
  }

  transferSeries(): readonly HistogramSeries[] {
    return this.transfers;
  }

  lookupSeries(): readonly HistogramSeries[] {
    return this.lookups;
  }

  preemptionCounts(): [PreemptionCause, number][] {
    return PREEMPTION_CAUSES.map((cause) => [cause, this.preemptions[cause]]);
  }
}
