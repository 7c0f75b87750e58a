import type { TimelineInterval } from '../report/html/run-report.js';
import type { ProgressSnapshot } from './progress.js';

/**
 * A run's counters sampled at a fixed interval, kept whole for the HTML
 * report: per interval, the prompt tokens served by each tier and the bytes
 * moved each way.
 */


const DEFAULT_INTERVAL_MS = 500;

export class RunTimeline {
  private readonly samples: { readonly atMs: number; readonly snapshot: ProgressSnapshot }[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly snapshot: () => ProgressSnapshot,
    private readonly intervalMs = DEFAULT_INTERVAL_MS,
  ) {}

  start(): void {
    this.take();
    this.timer = setInterval(() => this.take(), this.intervalMs);
    this.timer.unref();
  }

  /** Takes a last sample and stops sampling. */
  stop(): void {
    if (this.timer === null) return;
    clearInterval(this.timer);
    this.timer = null;
    this.take();
  }

  /** Differences between consecutive samples. */
  intervals(): TimelineInterval[] {
    const out: TimelineInterval[] = [];
    const start = this.samples[0]?.atMs ?? 0;
    for (let i = 1; i < this.samples.length; i++) {
      const a = this.samples[i - 1];
      const b = this.samples[i];
      const seconds = (b.atMs - a.atMs) / 1000;
      if (seconds <= 0) continue;
      out.push({
        endSeconds: (b.atMs - start) / 1000,
        seconds,
        promptTokens: b.snapshot.promptTokens - a.snapshot.promptTokens,
        promptReachedTokens: b.snapshot.promptReachedTokens - a.snapshot.promptReachedTokens,
        gpuHitTokens: b.snapshot.gpuHitTokens - a.snapshot.gpuHitTokens,
        cpuTierHitTokens: b.snapshot.cpuTierHitTokens - a.snapshot.cpuTierHitTokens,
        bytesGpuToCpu: b.snapshot.bytesGpuToCpu - a.snapshot.bytesGpuToCpu,
        bytesCpuToGpu: b.snapshot.bytesCpuToGpu - a.snapshot.bytesCpuToGpu,
      });
    }
    return out;
  }

  private take(): void {
    this.samples.push({ atMs: performance.now(), snapshot: this.snapshot() });
  }
}
