import type { CopyJobSpan, ForwardSpan } from '../protocol/step-protocol.js';
import type { RecordedDeviceSpans } from '../runtime/device-span-recorder.js';
import { isMeasured, isTimedSpan, summarizeDeviceTrace, type DeviceTraceSummary } from './device-trace-summary.js';

/**
 * A run's device trace in the Chrome Trace Event Format (the object form,
 * which Perfetto and chrome://tracing load): one process per rank, one
 * thread per stream (compute: forwards; load: CPU to GPU copy jobs; store:
 * GPU to CPU copy jobs), one complete event per forward and per copy job,
 * placed where the rank's device timed it.
 */

/** One event of the Chrome Trace Event Format (complete "X" or metadata "M"). */
export interface ChromeTraceEvent {
  readonly name: string;
  readonly ph: 'X' | 'M';
  readonly pid: number;
  readonly tid: number;
  readonly cat?: string;
  /** Microseconds. */
  readonly ts?: number;
  readonly dur?: number;
  readonly args?: Readonly<Record<string, unknown>>;
}

export interface ChromeTrace {
  readonly traceEvents: readonly ChromeTraceEvent[];
  readonly displayTimeUnit: 'ms';
  readonly otherData: Readonly<Record<string, unknown>>;
}

/** The trace of a run: its otherData carries the summary of its copy jobs against its forwards. */
export interface DeviceTrace extends ChromeTrace {
  readonly otherData: Readonly<Record<string, unknown>> & { readonly summary: DeviceTraceSummary };
}

/** A rank as the trace names it. */
export interface TracedRank {
  readonly rank: number;
  readonly deviceName: string;
}

export interface DeviceTraceInput {
  readonly spans: readonly RecordedDeviceSpans[];
  readonly ranks: readonly TracedRank[];
  readonly backend: string;
  /** Which run this is (e.g. "offload on"); null: the only one. */
  readonly label: string | null;
}

/** Thread ids of a rank's streams, in the order the viewer lists them. */
export const STREAM_THREADS = { compute: 1, load: 2, store: 3 } as const;

export const TIME_AXIS_NOTE =
  "ts and dur are device time in microseconds. Each rank's ts counts from the time origin its device took when it opened " +
  '(CUDA: an event recorded once the device was synchronized at open; host backend: its steady clock at open), so spans of ' +
  "one rank share an axis but ranks have separate origins: compare spans within a rank, not across ranks. A rank restarted " +
  'after a failure opens a new device with a new origin (args.deviceOpen). CUDA times its spans as float milliseconds, so a ' +
  "start 100 s after the open is good to about 8 microseconds. args.queuedUs is the time from the host's submit call to the " +
  "span's start (the host clock is put on the same axis when the device's origin completed, so it may be slightly negative " +
  "from clock drift and rounding); args.enqueueUs is the host time the submit spent enqueueing the span's own work after its " +
  'start mark, which lies inside the span when the stream was idle; null: not measured.';

export function buildDeviceTrace(input: DeviceTraceInput): DeviceTrace {
  const events: ChromeTraceEvent[] = [];
  for (const { rank, deviceName } of input.ranks) events.push(...rankMetadata(rank, deviceName));
  let untimed = 0;
  for (const recorded of input.spans) {
    const { rank, step, deviceOpen } = recorded;
    if (recorded.forward !== null) {
      const event = forwardEvent(rank, step, deviceOpen, recorded.forward);
      if (event === null) untimed += 1;
      else events.push(event);
    }
    for (const job of recorded.copyJobs) {
      const event = copyJobEvent(rank, step, deviceOpen, job);
      if (event === null) untimed += 1;
      else events.push(event);
    }
  }
  return {
    traceEvents: events,
    displayTimeUnit: 'ms',
    otherData: {
      producer: 'kvtier run --device-trace',
      ...(input.label === null ? {} : { run: input.label }),
      backend: input.backend,
      ranks: input.ranks.length,
      timeAxis: TIME_AXIS_NOTE,
      // Work the device ran but could not time (a copy job that failed on the device) has no place on the axis.
      untimedSpans: untimed,
      summary: summarizeDeviceTrace(input),
    },
  };
}

function rankMetadata(rank: number, deviceName: string): ChromeTraceEvent[] {
  const thread = (name: string, tid: number): ChromeTraceEvent[] => [
    { name: 'thread_name', ph: 'M', pid: rank, tid, args: { name } },
    { name: 'thread_sort_index', ph: 'M', pid: rank, tid, args: { sort_index: tid } },
  ];
  return [
    { name: 'process_name', ph: 'M', pid: rank, tid: 0, args: { name: `rank ${rank}` } },
    { name: 'process_labels', ph: 'M', pid: rank, tid: 0, args: { labels: deviceName } },
    { name: 'process_sort_index', ph: 'M', pid: rank, tid: 0, args: { sort_index: rank } },
    ...thread('compute', STREAM_THREADS.compute),
    ...thread('load', STREAM_THREADS.load),
    ...thread('store', STREAM_THREADS.store),
  ];
}

function forwardEvent(rank: number, step: number, deviceOpen: number, span: ForwardSpan): ChromeTraceEvent | null {
  if (!isTimedSpan(span.startMs, span.elapsedMs)) return null;
  return {
    name: `forward (step ${step})`,
    cat: 'forward',
    ph: 'X',
    pid: rank,
    tid: STREAM_THREADS.compute,
    ts: span.startMs * 1000,
    dur: span.elapsedMs * 1000,
    args: { step, requests: span.requests, tokens: span.tokens, deviceOpen, ...hostArgs(span) },
  };
}

function copyJobEvent(rank: number, step: number, deviceOpen: number, job: CopyJobSpan): ChromeTraceEvent | null {
  if (!isTimedSpan(job.startMs, job.elapsedMs)) return null;
  const stream = job.direction === 'cpuToGpu' ? 'load' : 'store';
  return {
    name: `${stream} job ${job.copyJobId}`,
    cat: stream,
    ph: 'X',
    pid: rank,
    tid: STREAM_THREADS[stream],
    ts: job.startMs * 1000,
    dur: job.elapsedMs * 1000,
    args: {
      jobId: job.copyJobId,
      transferJobIds: job.transferJobIds,
      bytes: job.bytes,
      ok: job.ok,
      ...(job.copyPath !== undefined ? { copyPath: job.copyPath } : {}),
      ...(job.error !== undefined ? { error: job.error } : {}),
      // The step whose report carried it (it may have finished during an earlier step's forward).
      reportedAtStep: step,
      deviceOpen,
      ...hostArgs(job),
    },
  };
}

/** A timed span's host side in microseconds, as the time axis note explains; null: not measured. */
function hostArgs(span: ForwardSpan | CopyJobSpan): { queuedUs: number | null; enqueueUs: number | null } {
  return {
    queuedUs: isMeasured(span.submitMs) ? (span.startMs - span.submitMs) * 1000 : null,
    enqueueUs: isMeasured(span.enqueueMs) ? span.enqueueMs * 1000 : null,
  };
}
