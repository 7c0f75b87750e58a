import type { CopyJobSpan, ForwardSpan, TransferDirection } from '../protocol/step-protocol.js';
import type { RecordedDeviceSpans } from '../runtime/device-span-recorder.js';

/**
 * What a device trace says about each rank's copy jobs, worked out of its
 * spans: per rank and direction (load: CPU to GPU; store: GPU to CPU) the
 * jobs, bytes, busy time and rate; the same split by how each job met the
 * rank's forwards (beside one, alone, or partly); the share of the busy time
 * spent beside forwards; and how long the copy stream sat idle between jobs.
 * Whether copies are slow beside forwards or slow anyway reads straight off
 * the rates of the "beside" and "alone" classes.
 *
 * Rules:
 * - Only timed spans count (startMs >= 0), as in the trace.
 * - Times are compared only within one device open of one rank: a restarted
 *   rank's device has a new time origin, so its jobs meet only the forwards
 *   of the same open.
 * - Busy time is the sum of the jobs' spans and GB/s is bytes (1e9 per GB)
 *   over it, as the run report's link rate. Should jobs of one direction
 *   overlap each other (one stream runs them one at a time, so they should
 *   not), each still counts its whole span in busy time; the stream's idle
 *   time is measured against the union of the jobs' spans, so an overlap
 *   never makes a gap negative, and `concurrentMs` (busy time less that
 *   union) says how much overlap there was.
 * - The host's side of each timed span (its submitMs and enqueueMs) is
 *   summed beside it, for copy jobs per direction and class and for the
 *   rank's forwards: host enqueue time and its share of the busy time of the
 *   spans it was measured for (host work inside the device span when the
 *   stream was idle), and the mean time from the submit call to the device's
 *   start (queued). A value the device did not measure (negative) is left
 *   out of its figure and counted. Queued times may be slightly negative:
 *   the host's and the device's clocks drift apart over a run and CUDA's
 *   float start times round; they are kept as they are.
 */

/** A job at least this share of whose span ran beside a forward is "beside". */
export const BESIDE_AT_LEAST = 0.9;
/** A job at most this share of whose span ran beside a forward is "alone". */
export const ALONE_AT_MOST = 0.1;

/** Host time the submits spent enqueueing the spans' own device work after their start marks. */
export interface HostEnqueueTotals {
  /** Spans it was measured for. */
  readonly spans: number;
  /** Spans it was not measured for, left out. */
  readonly unmeasured: number;
  readonly totalMs: number;
  /** null when no span was measured. */
  readonly meanMs: number | null;
  /** totalMs / the device busy time of the measured spans; null when that is zero. */
  readonly busyShare: number | null;
}

/** Time from each span's submit call to its start on the device (startMs - submitMs). */
export interface QueuedTotals {
  /** Spans whose submit time was measured. */
  readonly spans: number;
  /** Spans whose submit time was not measured, left out. */
  readonly unmeasured: number;
  /** null when no span was measured; may be slightly negative (clock drift, rounding). */
  readonly meanMs: number | null;
}

/** The host's side of a set of timed spans. */
export interface HostSideTotals {
  readonly enqueue: HostEnqueueTotals;
  readonly queued: QueuedTotals;
}

/** Copy jobs of one class (or all of a direction). */
export interface CopyJobTotals {
  readonly jobs: number;
  readonly bytes: number;
  /** Sum of the jobs' device spans, ms. */
  readonly busyMs: number;
  /** bytes / busy time, GB/s; null when the busy time is zero. */
  readonly gbps: number | null;
  readonly host: HostSideTotals;
}

/** The jobs of one direction split by the share of each job's span that ran beside a forward; null: no such job. */
export interface ForwardOverlapClasses {
  /** At least BESIDE_AT_LEAST of the span beside a forward. */
  readonly beside: CopyJobTotals | null;
  /** At most ALONE_AT_MOST of the span beside a forward. */
  readonly alone: CopyJobTotals | null;
  /** The rest. */
  readonly mixed: CopyJobTotals | null;
}

/** The copy stream of one direction between its first job's start and its last job's end (summed over device opens). */
export interface CopyStreamIdle {
  readonly spanMs: number;
  /** Time within the span that no job of the direction ran. */
  readonly idleMs: number;
  /** idleMs / spanMs; null when the span is empty. */
  readonly idleShare: number | null;
  /** Time jobs of the direction ran at once (0 on one stream). */
  readonly concurrentMs: number;
}

export interface CopyDirectionSummary extends CopyJobTotals {
  /** Timed jobs the device could not run (counted in the totals, with the bytes it moved: none). */
  readonly failedJobs: number;
  readonly byForwards: ForwardOverlapClasses;
  /** Busy time that ran beside a forward of the rank, ms. */
  readonly besideForwardsMs: number;
  /** besideForwardsMs / busyMs; null when the busy time is zero. */
  readonly besideForwardsShare: number | null;
  readonly stream: CopyStreamIdle;
}

export interface RankTraceSummary {
  readonly rank: number;
  /** Device opens whose timed spans the rank reported (more than one: the rank was restarted). */
  readonly deviceOpens: number;
  readonly forwards: { readonly count: number; readonly busyMs: number; readonly host: HostSideTotals };
  readonly load: CopyDirectionSummary;
  readonly store: CopyDirectionSummary;
  /** Spans the device did not time, left out of everything above. */
  readonly untimedSpans: number;
}

export interface DeviceTraceSummary {
  readonly besideAtLeast: number;
  readonly aloneAtMost: number;
  /** In rank order; every rank given, even one with no spans. */
  readonly ranks: readonly RankTraceSummary[];
}

/** A span on one device open's time axis, ms. */
interface Interval {
  readonly start: number;
  readonly end: number;
}

interface TimedJob extends Interval {
  readonly open: number;
  readonly job: CopyJobSpan;
}

interface TimedForward extends Interval {
  readonly forward: ForwardSpan;
}

/** A timed span with its host side, as hostSide reads it. */
interface HostTimedSpan extends Interval {
  readonly submitMs: number;
  readonly enqueueMs: number;
}

/** A time the device or host reported: negative (or not finite) means it was not measured. */
export function isMeasured(ms: number): boolean {
  return Number.isFinite(ms) && ms >= 0;
}

export function isTimedSpan(startMs: number, elapsedMs: number): boolean {
  return isMeasured(startMs) && isMeasured(elapsedMs);
}

export function summarizeDeviceTrace(input: { readonly spans: readonly RecordedDeviceSpans[]; readonly ranks: readonly { readonly rank: number }[] }): DeviceTraceSummary {
  const ranks = [...new Set([...input.ranks.map((r) => r.rank), ...input.spans.map((s) => s.rank)])].sort((a, b) => a - b);
  return {
    besideAtLeast: BESIDE_AT_LEAST,
    aloneAtMost: ALONE_AT_MOST,
    ranks: ranks.map((rank) => summarizeRank(rank, input.spans.filter((s) => s.rank === rank))),
  };
}

function summarizeRank(rank: number, spans: readonly RecordedDeviceSpans[]): RankTraceSummary {
  const forwards = new Map<number, TimedForward[]>();
  const jobs: TimedJob[] = [];
  let untimed = 0;
  for (const { deviceOpen, forward, copyJobs } of spans) {
    if (forward !== null) {
      if (!isTimedSpan(forward.startMs, forward.elapsedMs)) untimed += 1;
      else listOf(forwards, deviceOpen).push({ start: forward.startMs, end: forward.startMs + forward.elapsedMs, forward });
    }
    for (const job of copyJobs) {
      if (!isTimedSpan(job.startMs, job.elapsedMs)) untimed += 1;
      else jobs.push({ open: deviceOpen, start: job.startMs, end: job.startMs + job.elapsedMs, job });
    }
  }
  const merged = new Map([...forwards].map(([open, list]) => [open, union(list)]));
  const opens = new Set([...forwards.keys(), ...jobs.map((j) => j.open)]);
  const allForwards = [...forwards.values()].flat();
  return {
    rank,
    deviceOpens: opens.size,
    forwards: {
      count: allForwards.length,
      busyMs: allForwards.reduce((sum, f) => sum + (f.end - f.start), 0),
      host: hostSide(allForwards.map((f) => ({ start: f.start, end: f.end, submitMs: f.forward.submitMs, enqueueMs: f.forward.enqueueMs }))),
    },
    load: summarizeDirection(jobs, 'cpuToGpu', merged),
    store: summarizeDirection(jobs, 'gpuToCpu', merged),
    untimedSpans: untimed,
  };
}

function summarizeDirection(all: readonly TimedJob[], direction: TransferDirection, forwards: ReadonlyMap<number, readonly Interval[]>): CopyDirectionSummary {
  const jobs = all.filter((j) => j.job.direction === direction);
  const classes = { beside: [] as TimedJob[], alone: [] as TimedJob[], mixed: [] as TimedJob[] };
  let besideForwardsMs = 0;
  for (const j of jobs) {
    const overlapMs = overlapWith(j, forwards.get(j.open) ?? []);
    besideForwardsMs += overlapMs;
    const duration = j.end - j.start;
    // A job with no duration is beside a forward when its instant lies within one.
    const share = duration > 0 ? overlapMs / duration : forwardAt(j.start, forwards.get(j.open) ?? []) ? 1 : 0;
    if (share >= BESIDE_AT_LEAST) classes.beside.push(j);
    else if (share <= ALONE_AT_MOST) classes.alone.push(j);
    else classes.mixed.push(j);
  }
  const totals = copyJobTotals(jobs);
  const orNull = (list: readonly TimedJob[]) => (list.length === 0 ? null : copyJobTotals(list));
  return {
    ...totals,
    failedJobs: jobs.filter((j) => !j.job.ok).length,
    byForwards: { beside: orNull(classes.beside), alone: orNull(classes.alone), mixed: orNull(classes.mixed) },
    besideForwardsMs,
    besideForwardsShare: totals.busyMs > 0 ? besideForwardsMs / totals.busyMs : null,
    stream: streamIdle(jobs, totals.busyMs),
  };
}

function copyJobTotals(jobs: readonly TimedJob[]): CopyJobTotals {
  const bytes = jobs.reduce((sum, j) => sum + j.job.bytes, 0);
  const busyMs = jobs.reduce((sum, j) => sum + (j.end - j.start), 0);
  const host = hostSide(jobs.map((j) => ({ start: j.start, end: j.end, submitMs: j.job.submitMs, enqueueMs: j.job.enqueueMs })));
  return { jobs: jobs.length, bytes, busyMs, gbps: busyMs > 0 ? bytes / 1e9 / (busyMs / 1000) : null, host };
}

function hostSide(spans: readonly HostTimedSpan[]): HostSideTotals {
  const enqueued = spans.filter((s) => isMeasured(s.enqueueMs));
  const totalMs = enqueued.reduce((sum, s) => sum + s.enqueueMs, 0);
  const busyMs = enqueued.reduce((sum, s) => sum + (s.end - s.start), 0);
  const submitted = spans.filter((s) => isMeasured(s.submitMs));
  const queuedMs = submitted.reduce((sum, s) => sum + (s.start - s.submitMs), 0);
  return {
    enqueue: {
      spans: enqueued.length,
      unmeasured: spans.length - enqueued.length,
      totalMs,
      meanMs: enqueued.length > 0 ? totalMs / enqueued.length : null,
      busyShare: busyMs > 0 ? totalMs / busyMs : null,
    },
    queued: {
      spans: submitted.length,
      unmeasured: spans.length - submitted.length,
      meanMs: submitted.length > 0 ? queuedMs / submitted.length : null,
    },
  };
}

/** Idle time between a direction's jobs, per device open (each has its own axis), summed. */
function streamIdle(jobs: readonly TimedJob[], busyMs: number): CopyStreamIdle {
  let spanMs = 0;
  let coveredMs = 0;
  for (const open of new Set(jobs.map((j) => j.open))) {
    const covered = union(jobs.filter((j) => j.open === open));
    spanMs += covered[covered.length - 1].end - covered[0].start;
    coveredMs += covered.reduce((sum, c) => sum + (c.end - c.start), 0);
  }
  const idleMs = Math.max(0, spanMs - coveredMs);
  return { spanMs, idleMs, idleShare: spanMs > 0 ? idleMs / spanMs : null, concurrentMs: Math.max(0, busyMs - coveredMs) };
}

/** The union of intervals as disjoint intervals in time order. */
function union(intervals: readonly Interval[]): Interval[] {
  const sorted = [...intervals].sort((a, b) => a.start - b.start);
  const out: Interval[] = [];
  for (const { start, end } of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && start <= last.end) out[out.length - 1] = { start: last.start, end: Math.max(last.end, end) };
    else out.push({ start, end });
  }
  return out;
}

/** Time of `span` that disjoint, ordered `forwards` cover. */
function overlapWith(span: Interval, forwards: readonly Interval[]): number {
  let total = 0;
  for (let i = firstEndingAfter(forwards, span.start); i < forwards.length && forwards[i].start < span.end; i++) {
    total += Math.min(span.end, forwards[i].end) - Math.max(span.start, forwards[i].start);
  }
  return Math.max(0, total);
}

function forwardAt(t: number, forwards: readonly Interval[]): boolean {
  const i = firstEndingAfter(forwards, t);
  return i < forwards.length && forwards[i].start <= t;
}

/** Index of the first of disjoint, ordered intervals that ends after `t` (binary search: a trace holds thousands). */
function firstEndingAfter(intervals: readonly Interval[], t: number): number {
  let lo = 0;
  let hi = intervals.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (intervals[mid].end <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function listOf<K, V>(map: Map<K, V[]>, key: K): V[] {
  let list = map.get(key);
  if (list === undefined) map.set(key, (list = []));
  return list;
}
