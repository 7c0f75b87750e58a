import { SingleBar } from 'cli-progress';
import type { EngineMetrics } from '../runtime/engine-types.js';
import { formatRate } from '../core/byte-size.js';

/**
 * The live progress line of `kvtier run`, on stderr so that stdout carries
 * the report alone (`kvtier run > report.txt` keeps no progress). On a
 * terminal one line is redrawn about four times a second; otherwise (a log
 * file, CI) a plain line is printed every few seconds. It reads numbers
 * through a snapshot function, so it knows nothing of the engine.
 */

/** Cumulative counters at one moment. */
export interface ProgressSnapshot {
  readonly requestsDone: number;
  readonly requestsTotal: number;
  readonly promptTokens: number;
  /** Prompt tokens served or computed the first time: what the hit shares are shares of. */
  readonly promptReachedTokens: number;
  readonly outputTokens: number;
  readonly gpuHitTokens: number;
  readonly cpuTierHitTokens: number;
  readonly bytesGpuToCpu: number;
  readonly bytesCpuToGpu: number;
}

/** Rates over the last few seconds. */
export interface ProgressRates {
  readonly outputTokensPerSecond: number;
  readonly gbpsGpuToCpu: number;
  readonly gbpsCpuToGpu: number;
}

/** A snapshot from engine metrics; `requestsTotal` comes from the workload. */
export function snapshotFromMetrics(metrics: EngineMetrics, requestsTotal: number): ProgressSnapshot {
  return {
    requestsDone: metrics.requests.finished + metrics.requests.failed + metrics.requests.aborted,
    requestsTotal,
    promptTokens: metrics.tokens.prompt,
    promptReachedTokens: metrics.tokens.promptReached,
    outputTokens: metrics.tokens.output,
    gpuHitTokens: metrics.hits.gpuPrefixTokens,
    cpuTierHitTokens: metrics.hits.cpuTierTokens,
    bytesGpuToCpu: metrics.transfers.gpuToCpu.bytes,
    bytesCpuToGpu: metrics.transfers.cpuToGpu.bytes,
  };
}

interface TimedSnapshot {
  readonly atMs: number;
  readonly snapshot: ProgressSnapshot;
}

/** Rates between two snapshots taken `seconds` apart. */
export function ratesBetween(before: ProgressSnapshot, after: ProgressSnapshot, seconds: number): ProgressRates {
  if (seconds <= 0) return { outputTokensPerSecond: 0, gbpsGpuToCpu: 0, gbpsCpuToGpu: 0 };
  return {
    outputTokensPerSecond: (after.outputTokens - before.outputTokens) / seconds,
    gbpsGpuToCpu: (after.bytesGpuToCpu - before.bytesGpuToCpu) / 1e9 / seconds,
    gbpsCpuToGpu: (after.bytesCpuToGpu - before.bytesCpuToGpu) / 1e9 / seconds,
  };
}

/**
 * One progress line, e.g. "[12.3s] requests 120/256 | 1,234 tok/s | hits GPU 34.1% CPU 38.0% | GPU->CPU 1.20 GB/s CPU->GPU 800.0 MB/s";
 * with a `label` (which run of several it is) the line starts "[offload on] ".
 */
export function formatProgressLine(snapshot: ProgressSnapshot, rates: ProgressRates, elapsedMs: number, label: string | null = null): string {
  // Each hit is a prompt token reached, counted at the same moment: the shares never pass 100%.
  const reached = snapshot.promptReachedTokens;
  const pct = (part: number) => (reached === 0 ? '-' : `${((100 * part) / reached).toFixed(1)}%`);
  return [
    `${label === null ? '' : `[${label}] `}[${(elapsedMs / 1000).toFixed(1)}s] requests ${snapshot.requestsDone}/${snapshot.requestsTotal}`,
    `${Math.round(rates.outputTokensPerSecond).toLocaleString('en-US')} tok/s`,
    `hits GPU ${pct(snapshot.gpuHitTokens)} CPU ${pct(snapshot.cpuTierHitTokens)}`,
    `GPU->CPU ${formatRate(rates.gbpsGpuToCpu)} CPU->GPU ${formatRate(rates.gbpsCpuToGpu)}`,
  ].join(' | ');
}

export interface ProgressOptions {
  readonly snapshot: () => ProgressSnapshot;
  /** Default process.stderr. */
  readonly stream?: NodeJS.WritableStream & { isTTY?: boolean };
  /** Names the run the line belongs to when a command makes several (`--compare`: "offload off", "offload on"). */
  readonly label?: string;
  /** Seconds between plain lines when the stream is not a terminal (default 5). */
  readonly plainIntervalSeconds?: number;
}

/** Rates are measured over about this window, so the line is steady but current. */
const RATE_WINDOW_MS = 2000;
const SAMPLE_MS = 250;

export class ProgressLine {
  private readonly bar: SingleBar;
  private readonly samples: TimedSnapshot[] = [];
  private timer: NodeJS.Timeout | null = null;
  private startMs = 0;

  constructor(private readonly options: ProgressOptions) {
    const stream = options.stream ?? process.stderr;
    this.bar = new SingleBar({
      stream,
      format: (_options, _params, payload: { line?: string }) => payload.line ?? '',
      fps: 1000 / SAMPLE_MS,
      noTTYOutput: true,
      notTTYSchedule: (options.plainIntervalSeconds ?? 5) * 1000,
      hideCursor: false,
      linewrap: false,
      // A terminal keeps the last line; a log already ended it with a newline.
      clearOnComplete: stream.isTTY !== true,
    });
  }

  start(): void {
    this.startMs = performance.now();
    const first = this.sample();
    this.bar.start(first.requestsTotal, first.requestsDone, { line: this.line() });
    this.timer = setInterval(() => this.refresh(), SAMPLE_MS);
    this.timer.unref();
  }

  /** Draws a last line and releases the terminal line. */
  stop(): void {
    if (this.timer === null) return;
    clearInterval(this.timer);
    this.timer = null;
    this.refresh();
    this.bar.stop();
  }

  private refresh(): void {
    const current = this.sample();
    this.bar.setTotal(current.requestsTotal);
    this.bar.update(current.requestsDone, { line: this.line() });
  }

  private sample(): ProgressSnapshot {
    const atMs = performance.now();
    const snapshot = this.options.snapshot();
    this.samples.push({ atMs, snapshot });
    while (this.samples.length > 2 && atMs - this.samples[1].atMs >= RATE_WINDOW_MS) this.samples.shift();
    return snapshot;
  }

  private line(): string {
    const oldest = this.samples[0];
    const newest = this.samples[this.samples.length - 1];
    const rates = ratesBetween(oldest.snapshot, newest.snapshot, (newest.atMs - oldest.atMs) / 1000);
    return formatProgressLine(newest.snapshot, rates, newest.atMs - this.startMs, this.options.label ?? null);
  }
}
