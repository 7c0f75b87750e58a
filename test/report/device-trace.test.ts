import { describe, expect, it } from 'vitest';
import type { CopyJobSpan, ForwardSpan } from '../../src/protocol/step-protocol.js';
import { buildDeviceTrace, STREAM_THREADS, type ChromeTraceEvent } from '../../src/report/device-trace.js';
import type { RecordedDeviceSpans } from '../../src/runtime/device-span-recorder.js';

const RANKS = [
  { rank: 0, deviceName: 'host (x86_64)' },
  { rank: 1, deviceName: 'host (x86_64)' },
];

/** Submitted 0.25 ms before its start, 0.125 ms of host enqueue. */
function forward(startMs: number, elapsedMs: number, extra: Partial<ForwardSpan> = {}): ForwardSpan {
  return { requests: 2, tokens: 9, startMs, elapsedMs, submitMs: startMs - 0.25, enqueueMs: 0.125, ...extra };
}

/** Submitted 0.5 ms before its start, 0.0625 ms of host enqueue. */
function copyJob(copyJobId: number, direction: CopyJobSpan['direction'], startMs: number, extra: Partial<CopyJobSpan> = {}): CopyJobSpan {
  const host = { submitMs: startMs - 0.5, enqueueMs: 0.0625 };
  return { copyJobId, transferJobIds: [copyJobId], direction, bytes: 4096, ok: true, copyPath: 'memcpy', startMs, elapsedMs: 0.25, ...host, ...extra };
}

function recorded(rank: number, step: number, fwd: ForwardSpan | null, copyJobs: CopyJobSpan[] = []): RecordedDeviceSpans {
  return { rank, step, deviceOpen: 1, forward: fwd, copyJobs };
}

const complete = (events: readonly ChromeTraceEvent[]) => events.filter((e) => e.ph === 'X');

describe('the device trace', () => {
  it('names a process per rank and a thread per stream, even for a rank with no spans', () => {
    const trace = buildDeviceTrace({ spans: [], ranks: RANKS, backend: 'host', label: null });
    const names = trace.traceEvents.filter((e) => e.ph === 'M' && e.name.endsWith('_name')).map((e) => [e.pid, e.tid, e.args?.name]);
    expect(names).toEqual([
      [0, 0, 'rank 0'],
      [0, STREAM_THREADS.compute, 'compute'],
      [0, STREAM_THREADS.load, 'load'],
      [0, STREAM_THREADS.store, 'store'],
      [1, 0, 'rank 1'],
      [1, STREAM_THREADS.compute, 'compute'],
      [1, STREAM_THREADS.load, 'load'],
      [1, STREAM_THREADS.store, 'store'],
    ]);
    expect(complete(trace.traceEvents)).toEqual([]);
  });

  it("places each span on its rank's stream in microseconds, with what a reader needs in its args", () => {
    const trace = buildDeviceTrace({
      spans: [
        recorded(0, 4, forward(1.5, 2), [copyJob(7, 'cpuToGpu', 0.5, { transferJobIds: [7, 8] })]),
        recorded(1, 4, null, [copyJob(9, 'gpuToCpu', 3, { ok: false, bytes: 0, copyPath: undefined, error: 'injected' })]),
      ],
      ranks: RANKS,
      backend: 'host',
      label: 'offload on',
    });
    expect(complete(trace.traceEvents)).toEqual([
      { name: 'forward (step 4)', cat: 'forward', ph: 'X', pid: 0, tid: STREAM_THREADS.compute, ts: 1500, dur: 2000, args: { step: 4, requests: 2, tokens: 9, deviceOpen: 1, queuedUs: 250, enqueueUs: 125 } },
      {
        name: 'load job 7',
        cat: 'load',
        ph: 'X',
        pid: 0,
        tid: STREAM_THREADS.load,
        ts: 500,
        dur: 250,
        args: { jobId: 7, transferJobIds: [7, 8], bytes: 4096, ok: true, copyPath: 'memcpy', reportedAtStep: 4, deviceOpen: 1, queuedUs: 500, enqueueUs: 62.5 },
      },
      {
        name: 'store job 9',
        cat: 'store',
        ph: 'X',
        pid: 1,
        tid: STREAM_THREADS.store,
        ts: 3000,
        dur: 250,
        args: { jobId: 9, transferJobIds: [9], bytes: 0, ok: false, error: 'injected', reportedAtStep: 4, deviceOpen: 1, queuedUs: 500, enqueueUs: 62.5 },
      },
    ]);
    expect(trace.otherData).toMatchObject({ run: 'offload on', backend: 'host', ranks: 2, untimedSpans: 0 });
  });

  it('leaves out a span the device did not time and counts it instead', () => {
    const trace = buildDeviceTrace({
      spans: [recorded(0, 1, forward(-1, 0), [copyJob(3, 'cpuToGpu', -1), copyJob(4, 'cpuToGpu', 2)])],
      ranks: RANKS,
      backend: 'cuda',
      label: null,
    });
    expect(complete(trace.traceEvents).map((e) => e.name)).toEqual(['load job 4']);
    expect(trace.otherData.untimedSpans).toBe(2);
  });

  it("gives a span's host side null where the device did not measure it, and a queued time before the start as it is", () => {
    const trace = buildDeviceTrace({
      spans: [recorded(0, 1, forward(2, 1, { submitMs: -1, enqueueMs: -1 }), [copyJob(5, 'cpuToGpu', 1, { submitMs: 1.25 })])],
      ranks: RANKS,
      backend: 'cuda',
      label: null,
    });
    const [fwd, load] = complete(trace.traceEvents);
    expect(fwd.args).toMatchObject({ queuedUs: null, enqueueUs: null });
    // The host's clock may run a little ahead of the device's: the submit lands after the start.
    expect(load.args).toMatchObject({ queuedUs: -250, enqueueUs: 62.5 });
    expect(trace.otherData.timeAxis).toMatch(/args\.queuedUs .* slightly negative/);
  });

  it("says that each rank's times count from its own device's open", () => {
    const trace = buildDeviceTrace({ spans: [], ranks: RANKS, backend: 'host', label: null });
    expect(trace.otherData.timeAxis).toMatch(/ranks have separate origins/);
    expect(trace.displayTimeUnit).toBe('ms');
  });
});
