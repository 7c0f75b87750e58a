import { MAX_TIMER_MS } from '../config/limits.js';
import { ConfigError } from '../core/errors.js';
import type { FinishedRequest } from '../runtime/engine-types.js';
import type { Trace } from './trace.js';
import { tracePromptTokens } from './trace-tokens.js';
import type { ArrivingRequest, Workload } from './workload.js';

export interface TraceReplayOptions {
  /** Token ids are drawn from [0, vocabSize). */
  readonly vocabSize: number;
  /** Arrival times are the trace's divided by this factor (default 1). */
  readonly speedup?: number;
  /** false: every request arrives at time 0 (submit all at once). Default true. */
  readonly arrivals?: boolean;
}

/**
 * The one bound on --speedup that every command replaying a trace by its
 * arrivals applies: a finite number > 0 that brings the slice's last arrival
 * within the longest wait a timer can express (about 24.8 days); a slower
 * replay would never end. Throws a ConfigError naming the flag and the line.
 */
export function checkArrivalSpan(trace: Trace, speedup: number, advice = 'raise --speedup'): void {
  if (!(speedup > 0) || !Number.isFinite(speedup)) throw new ConfigError(`--speedup ${speedup}: expected a number > 0`);
  const last = trace.records[trace.records.length - 1];
  if (last === undefined) return;
  const waitMs = (last.timestampMs - trace.originMs) / speedup;
  if (waitMs <= MAX_TIMER_MS) return;
  const days = (waitMs / 86_400_000).toPrecision(3);
  throw new ConfigError(
    `${trace.file}:${last.line}: this request would arrive ${days} days into the replay (--speedup ${speedup}), ` +
      `past the longest wait of ${(MAX_TIMER_MS / 86_400_000).toFixed(1)} days: ${advice}`,
  );
}

/**
 * Open-loop replay of a Mooncake trace: requests arrive at their (scaled)
 * timestamps measured from the slice's start, whatever the engine does. A
 * request's seed is its line number, so a replay is the same on every run.
 * Prompts are built only when their request is taken.
 */
export class TraceWorkload implements Workload {
  readonly description: string;
  readonly plannedRequests: number;
  private readonly arrivalsMs: Float64Array;
  private next = 0;

  constructor(
    private readonly trace: Trace,
    private readonly options: TraceReplayOptions,
  ) {
    const speedup = options.speedup ?? 1;
    const arrivals = options.arrivals ?? true;
    if (arrivals) checkArrivalSpan(trace, speedup);
    this.plannedRequests = trace.records.length;
    this.arrivalsMs = Float64Array.from(trace.records, (r) => (arrivals ? (r.timestampMs - trace.originMs) / speedup : 0));
    const timing = arrivals ? (speedup === 1 ? 'trace arrival times' : `arrivals ${speedup}x faster`) : 'all at once';
    const scale = trace.tokenScale === 1 ? '' : `, lengths / ${trace.tokenScale}`;
    this.description = `trace ${trace.file}: ${trace.records.length} requests, ${timing}${scale}`;
  }

  takeDue(nowMs: number, limit = Infinity): ArrivingRequest[] {
    const due: ArrivingRequest[] = [];
    const records = this.trace.records;
    while (due.length < limit && this.next < records.length && this.arrivalsMs[this.next] <= nowMs) {
      const record = records[this.next];
      due.push({
        arrivalMs: this.arrivalsMs[this.next],
        spec: {
          id: `trace-L${record.line}`,
          promptTokens: tracePromptTokens(record.hashIds, record.inputLength, this.trace.blockTokens, this.options.vocabSize),
          maxTokens: record.outputLength,
          seed: record.line,
        },
      });
      this.next++;
    }
    return due;
  }

  nextArrivalMs(): number | null {
    return this.next < this.arrivalsMs.length ? this.arrivalsMs[this.next] : null;
  }

  onFinished(_finished: FinishedRequest, _nowMs: number): void {
    // Open loop: finishing a request schedules nothing.
  }

  done(): boolean {
    return this.next >= this.arrivalsMs.length;
  }
}
