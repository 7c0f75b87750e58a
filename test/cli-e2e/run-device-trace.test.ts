import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/report/report.js';
import type { CopyDirectionSummary, DeviceTraceSummary, HostSideTotals } from '../../src/report/device-trace-summary.js';
import { expectUsageFailure, kvtier, scratchDir } from './cli.js';

/** A small chat on two host ranks whose second round loads from the CPU tier (as in the --html test). */
const SMALL_CHAT = ['--backend', 'host', '--tp', '2', '--requests', '16', '--rounds', '2', '--gpu-blocks', '96', '--cpu-blocks', '1024'];

interface TraceEvent {
  readonly name: string;
  readonly ph: string;
  readonly pid: number;
  readonly tid: number;
  readonly ts?: number;
  readonly dur?: number;
  readonly args?: Record<string, unknown>;
}

interface Trace {
  readonly traceEvents: readonly TraceEvent[];
  readonly otherData: Record<string, unknown> & { readonly summary: DeviceTraceSummary };
}

type TracedReport = RunReport & { readonly deviceTraceSummary?: DeviceTraceSummary };

/** The thread of `pid` the trace names `name` (fails the test when it names none). */
function threadNamed(trace: Trace, pid: number, name: string): number {
  const meta = trace.traceEvents.find((e) => e.ph === 'M' && e.name === 'thread_name' && e.pid === pid && e.args?.name === name);
  expect(meta, `rank ${pid} names a thread "${name}"`).toBeDefined();
  return meta!.tid;
}

function spansOn(trace: Trace, pid: number, tid: number): TraceEvent[] {
  return trace.traceEvents.filter((e) => e.ph === 'X' && e.pid === pid && e.tid === tid);
}

let sharedRun: ReturnType<typeof runTraced> | null = null;

/** One traced run, shared by the tests that read it. */
function tracedRun(): ReturnType<typeof runTraced> {
  sharedRun ??= runTraced();
  return sharedRun;
}

async function runTraced(): Promise<{ report: TracedReport; trace: Trace; stdout: string }> {
  const dir = scratchDir();
  const result = await kvtier(['run', ...SMALL_CHAT, '--json', join(dir, 'report.json'), '--device-trace', join(dir, 'trace.json')]);
  if (result.code !== 0) throw new Error(`kvtier run exited ${result.code}:\n${result.stderr}`);
  return {
    stdout: result.stdout,
    report: JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as TracedReport,
    trace: JSON.parse(readFileSync(join(dir, 'trace.json'), 'utf8')) as Trace,
  };
}

/** A direction's summary counts the trace's events of that stream: their jobs, bytes and busy time, split into classes that add up. */
function expectDirectionMatches(summary: CopyDirectionSummary, events: readonly TraceEvent[]): void {
  expect(summary.jobs).toBe(events.length);
  expect(summary.jobs).toBeGreaterThan(0);
  expect(summary.bytes).toBe(events.reduce((sum, e) => sum + (e.args?.bytes as number), 0));
  // Tolerance: the trace's microseconds are the summary's milliseconds times 1000, rounded in the last bits.
  expect(summary.busyMs).toBeCloseTo(events.reduce((sum, e) => sum + e.dur!, 0) / 1000, 6);
  const classes = [summary.byForwards.beside, summary.byForwards.alone, summary.byForwards.mixed].flatMap((c) => (c === null ? [] : [c]));
  expect(classes.reduce((sum, c) => sum + c.jobs, 0)).toBe(summary.jobs);
  expect(classes.reduce((sum, c) => sum + c.bytes, 0)).toBe(summary.bytes);
  expect(summary.besideForwardsMs).toBeLessThanOrEqual(summary.busyMs);
  expect(summary.stream.idleMs).toBeLessThanOrEqual(summary.stream.spanMs);
  expectHostSideMatches(summary.host, events);
}

/** The host side of a set of spans: measured for every one (the host backend measures all), with the events' mean queued and total enqueue time. */
function expectHostSideMatches(host: HostSideTotals, events: readonly TraceEvent[]): void {
  expect(host.enqueue).toMatchObject({ spans: events.length, unmeasured: 0 });
  expect(host.queued).toMatchObject({ spans: events.length, unmeasured: 0 });
  const arg = (e: TraceEvent, name: string) => e.args?.[name] as number;
  expect(host.enqueue.totalMs).toBeCloseTo(events.reduce((sum, e) => sum + arg(e, 'enqueueUs'), 0) / 1000, 6);
  expect(host.queued.meanMs!).toBeCloseTo(events.reduce((sum, e) => sum + arg(e, 'queuedUs'), 0) / 1000 / events.length, 6);
  expect(host.enqueue.busyShare).not.toBeNull();
}

describe('kvtier run --device-trace', () => {
  it("writes every rank's forwards and copy jobs as its device timed them, one process per rank and one thread per stream", { timeout: 90_000 }, async () => {
    const { report, trace } = await tracedRun();
    const { tp } = report;
    expect(tp).toBe(2);
    // The run loaded and stored, so the copy checks below have something to check.
    expect(report.transfers.cpuToGpu.copyJobsPerRank).toBeGreaterThan(0);
    expect(report.transfers.gpuToCpu.copyJobsPerRank).toBeGreaterThan(0);
    for (const event of trace.traceEvents) {
      expect(['X', 'M']).toContain(event.ph);
      expect(Number.isInteger(event.pid) && Number.isInteger(event.tid)).toBe(true);
      if (event.ph === 'X') {
        expect(event.ts).toBeGreaterThanOrEqual(0);
        expect(event.dur).toBeGreaterThanOrEqual(0);
        // The host backend's device clock is the host's: a span starts no earlier than its submit call.
        expect(event.args?.queuedUs as number).toBeGreaterThanOrEqual(0);
        expect(event.args?.enqueueUs as number).toBeGreaterThanOrEqual(0);
      }
    }
    let loadBytes = 0;
    let storeBytes = 0;
    const copyJobIds: string[][] = [];
    for (let rank = 0; rank < tp; rank++) {
      const process = trace.traceEvents.find((e) => e.ph === 'M' && e.name === 'process_name' && e.pid === rank);
      expect(process?.args?.name).toBe(`rank ${rank}`);
      const loads = spansOn(trace, rank, threadNamed(trace, rank, 'load'));
      const stores = spansOn(trace, rank, threadNamed(trace, rank, 'store'));
      // Each copy job the report counts appears once on each rank that ran it.
      expect(loads).toHaveLength(report.transfers.cpuToGpu.copyJobsPerRank);
      expect(stores).toHaveLength(report.transfers.gpuToCpu.copyJobsPerRank);
      const ids = [...loads, ...stores].map((e) => `${e.name}:${String(e.args?.jobId)}`);
      expect(new Set(ids).size).toBe(ids.length);
      copyJobIds.push(ids.sort());
      for (const e of [...loads, ...stores]) expect(e.args).toMatchObject({ ok: true, copyPath: 'memcpy' });
      loadBytes += loads.reduce((sum, e) => sum + (e.args?.bytes as number), 0);
      storeBytes += stores.reduce((sum, e) => sum + (e.args?.bytes as number), 0);
      // The compute stream ran the forwards one after another, in the order the steps submitted them.
      const forwards = spansOn(trace, rank, threadNamed(trace, rank, 'compute'));
      expect(forwards.length).toBeGreaterThan(0);
      for (let i = 1; i < forwards.length; i++) {
        const [before, after] = [forwards[i - 1], forwards[i]];
        expect(after.args?.step as number).toBeGreaterThan(before.args?.step as number);
        // Tolerance: the rounding of microsecond sums, a nanosecond.
        expect(after.ts!).toBeGreaterThanOrEqual(before.ts! + before.dur! - 1e-3);
      }
      for (const f of forwards) expect(f.args?.tokens as number).toBeGreaterThan(0);
    }
    // Every rank ran the same copy jobs; summed over ranks, their bytes are the report's.
    expect(copyJobIds[1]).toEqual(copyJobIds[0]);
    expect(loadBytes).toBe(report.transfers.cpuToGpu.bytes);
    expect(storeBytes).toBe(report.transfers.gpuToCpu.bytes);
    expect(trace.otherData.untimedSpans).toBe(0);
  });

  it("prints the trace's summary after the report and puts it in the trace and the JSON report, agreeing with the trace's events", { timeout: 90_000 }, async () => {
    const { report, trace, stdout } = await tracedRun();
    const { summary } = trace.otherData;
    expect(report.deviceTraceSummary).toEqual(summary);
    expect(summary.ranks.map((r) => r.rank)).toEqual([0, 1]);
    const printed = stdout.split('\n').filter((line) => line.startsWith('device trace rank '));
    for (const rank of summary.ranks) {
      expect(rank.deviceOpens).toBe(1);
      const forwards = spansOn(trace, rank.rank, threadNamed(trace, rank.rank, 'compute'));
      expect(rank.forwards.count).toBe(forwards.length);
      expectHostSideMatches(rank.forwards.host, forwards);
      expect(printed).toContainEqual(
        expect.stringMatching(new RegExp(`^device trace rank ${rank.rank} forwards: ${forwards.length} timed, host enqueue mean [\\d.]+ ms, queued before start mean [\\d.]+ ms$`)),
      );
      for (const [stream, direction, word] of [['load', rank.load, 'loads'], ['store', rank.store, 'stores']] as const) {
        const events = spansOn(trace, rank.rank, threadNamed(trace, rank.rank, stream));
        expectDirectionMatches(direction, events);
        const line = printed.find((l) => l.startsWith(`device trace rank ${rank.rank} ${word}: `));
        expect(line, `a printed line for rank ${rank.rank} ${word}`).toBeDefined();
        expect(line).toMatch(new RegExp(`: ${direction.jobs} jobs?, `));
        expect(line).toMatch(/of busy time beside forwards; stream idle [\d.]+% of its span/);
        expect(line).toMatch(/; host enqueue [\d.]+% of busy time, queued before start mean [\d.]+ ms$/);
      }
    }
    expect(printed).toHaveLength(3 * summary.ranks.length);
  });

  it('with --compare, traces the offload-on run, the one with copy jobs', { timeout: 90_000 }, async () => {
    const dir = scratchDir();
    const file = join(dir, 'trace.json');
    const result = await kvtier(['run', ...SMALL_CHAT, '--compare', '--json', join(dir, 'report.json'), '--device-trace', file]);
    expect(result.code).toBe(0);
    const trace = JSON.parse(readFileSync(file, 'utf8')) as Trace;
    expect(trace.otherData.run).toBe('offload on');
    expect(spansOn(trace, 0, threadNamed(trace, 0, 'load')).length).toBeGreaterThan(0);
    // The summary is the traced run's: printed once, and in that run's report only.
    const json = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as { offloadOff: TracedReport; offloadOn: TracedReport };
    expect(json.offloadOn.deviceTraceSummary).toEqual(trace.otherData.summary);
    expect(json.offloadOff).not.toHaveProperty('deviceTraceSummary');
    expect(result.stdout.split('\n').filter((line) => line.startsWith('device trace rank 0 loads: '))).toHaveLength(1);
  });

  it('refuses an empty path or a folder before running anything, naming the option', async () => {
    const dir = scratchDir();
    expect(expectUsageFailure(await kvtier(['run', ...SMALL_CHAT, '--device-trace', dir]))).toBe(
      `kvtier: --device-trace ${dir}: cannot write there: it is not a regular file`,
    );
    expect(expectUsageFailure(await kvtier(['run', ...SMALL_CHAT, '--device-trace', '']))).toBe(
      'kvtier: --device-trace: invalid value "": expected an output file path',
    );
  });
});
