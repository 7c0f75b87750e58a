import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/report/report.js';
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
  readonly otherData: Record<string, unknown>;
}

/** The thread of `pid` the trace names `name` (fails the test when it names none). */
function threadNamed(trace: Trace, pid: number, name: string): number {
  const meta = trace.traceEvents.find((e) => e.ph === 'M' && e.name === 'thread_name' && e.pid === pid && e.args?.name === name);
  expect(meta, `rank ${pid} names a thread "${name}"`).toBeDefined();
  return meta!.tid;
}

function spansOn(trace: Trace, pid: number, tid: number): TraceEvent[] {
  return trace.traceEvents.filter((e) => e.ph === 'X' && e.pid === pid && e.tid === tid);
}

async function tracedRun(): Promise<{ report: RunReport; trace: Trace }> {
  const dir = scratchDir();
  const result = await kvtier(['run', ...SMALL_CHAT, '--json', join(dir, 'report.json'), '--device-trace', join(dir, 'trace.json')]);
  if (result.code !== 0) throw new Error(`kvtier run exited ${result.code}:\n${result.stderr}`);
  return {
    report: JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as RunReport,
    trace: JSON.parse(readFileSync(join(dir, 'trace.json'), 'utf8')) as Trace,
  };
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

  it('with --compare, traces the offload-on run, the one with copy jobs', { timeout: 90_000 }, async () => {
    const file = join(scratchDir(), 'trace.json');
    const result = await kvtier(['run', ...SMALL_CHAT, '--compare', '--device-trace', file]);
    expect(result.code).toBe(0);
    const trace = JSON.parse(readFileSync(file, 'utf8')) as Trace;
    expect(trace.otherData.run).toBe('offload on');
    expect(spansOn(trace, 0, threadNamed(trace, 0, 'load')).length).toBeGreaterThan(0);
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
