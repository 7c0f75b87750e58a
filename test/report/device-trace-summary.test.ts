import { describe, expect, it } from 'vitest';
import type { CopyJobSpan, ForwardSpan } from '../../src/protocol/step-protocol.js';
import { buildDeviceTrace } from '../../src/report/device-trace.js';
import { summarizeDeviceTrace, type CopyDirectionSummary } from '../../src/report/device-trace-summary.js';
import { formatDeviceTraceSummary } from '../../src/report/report-format.js';
import type { RecordedDeviceSpans } from '../../src/runtime/device-span-recorder.js';

function forward(startMs: number, elapsedMs: number): ForwardSpan {
  return { requests: 1, tokens: 4, startMs, elapsedMs };
}

let nextJobId = 1;

function job(direction: CopyJobSpan['direction'], startMs: number, elapsedMs: number, bytes: number, extra: Partial<CopyJobSpan> = {}): CopyJobSpan {
  const copyJobId = nextJobId++;
  return { copyJobId, transferJobIds: [copyJobId], direction, bytes, ok: true, startMs, elapsedMs, ...extra };
}

const loadJob = (startMs: number, elapsedMs: number, bytes: number) => job('cpuToGpu', startMs, elapsedMs, bytes);
const storeJob = (startMs: number, elapsedMs: number, bytes: number) => job('gpuToCpu', startMs, elapsedMs, bytes);

function step(rank: number, step: number, fwd: ForwardSpan | null, copyJobs: CopyJobSpan[] = [], deviceOpen = 1): RecordedDeviceSpans {
  return { rank, step, deviceOpen, forward: fwd, copyJobs };
}

function summarize(spans: RecordedDeviceSpans[], ranks = [0]) {
  return summarizeDeviceTrace({ spans, ranks: ranks.map((rank) => ({ rank })) });
}

/**
 * Rank 0: forwards over 10-20 and 30-40 ms; a load inside the first (12-16),
 * one between them (22-26), one half over the second (38-42); a store before
 * both (0-5).
 */
const ONE_RANK = [
  step(0, 1, forward(10, 10), [storeJob(0, 5, 1e6)]),
  step(0, 2, forward(30, 10), [loadJob(12, 4, 8e6), loadJob(22, 4, 20e6)]),
  step(0, 3, null, [loadJob(38, 4, 12e6)]),
];

describe("the device trace's summary", () => {
  it('puts a load inside a forward beside it, one between forwards alone and one half over a forward mixed, each at its own rate', () => {
    const { load } = summarize(ONE_RANK).ranks[0];
    expect(load.byForwards.beside).toEqual({ jobs: 1, bytes: 8e6, busyMs: 4, gbps: expect.closeTo(2, 12) });
    expect(load.byForwards.alone).toEqual({ jobs: 1, bytes: 20e6, busyMs: 4, gbps: expect.closeTo(5, 12) });
    expect(load.byForwards.mixed).toEqual({ jobs: 1, bytes: 12e6, busyMs: 4, gbps: expect.closeTo(3, 12) });
  });

  it("totals a direction's jobs, bytes, busy time and rate, and the share of its busy time beside forwards", () => {
    const { load, store } = summarize(ONE_RANK).ranks[0];
    expect(load).toMatchObject({ jobs: 3, failedJobs: 0, bytes: 40e6, busyMs: 12, besideForwardsMs: 6, besideForwardsShare: 0.5 });
    expect(load.gbps).toBeCloseTo(40 / 12, 12);
    expect(store).toMatchObject({ jobs: 1, bytes: 1e6, busyMs: 5, besideForwardsMs: 0, besideForwardsShare: 0 });
  });

  it("measures the copy stream's idle time between a direction's jobs within its first start to last end", () => {
    const { load, store } = summarize(ONE_RANK).ranks[0];
    // Loads run over 12-16, 22-26 and 38-42: a 30 ms span with 6 + 12 ms between them.
    expect(load.stream).toEqual({ spanMs: 30, idleMs: 18, idleShare: 0.6, concurrentMs: 0 });
    expect(store.stream).toEqual({ spanMs: 5, idleMs: 0, idleShare: 0, concurrentMs: 0 });
  });

  it('leaves a class with no jobs null', () => {
    const { store } = summarize(ONE_RANK).ranks[0];
    expect(store.byForwards).toEqual({ beside: null, alone: { jobs: 1, bytes: 1e6, busyMs: 5, gbps: expect.closeTo(0.2, 12) }, mixed: null });
  });

  it('classes a job exactly 90% beside a forward as beside and one exactly 10% beside as alone', () => {
    const { load } = summarize([step(0, 1, forward(0, 9), [loadJob(0, 10, 1e6), loadJob(8, 10, 1e6)])]).ranks[0];
    expect(load.byForwards.beside?.jobs).toBe(1);
    expect(load.byForwards.alone?.jobs).toBe(1);
    expect(load.byForwards.mixed).toBeNull();
  });

  it("compares a restarted rank's spans only with the forwards of the same device open", () => {
    // Open 1's forward covers 0-100 on its axis, open 2's 200-300 on its own: each open's load lies under the other open's forward.
    const rank = summarize([
      step(0, 1, forward(0, 100), [loadJob(250, 10, 1e6)], 1),
      step(0, 2, forward(200, 100), [loadJob(50, 10, 1e6)], 2),
    ]).ranks[0];
    expect(rank.deviceOpens).toBe(2);
    expect(rank.load.byForwards.alone?.jobs).toBe(2);
    expect(rank.load.byForwards.beside).toBeNull();
    expect(rank.load.besideForwardsMs).toBe(0);
    // Each open's stream span is its own job: no idle time across the two axes.
    expect(rank.load.stream).toEqual({ spanMs: 20, idleMs: 0, idleShare: 0, concurrentMs: 0 });
  });

  it('ignores spans the device did not time, and counts them', () => {
    const rank = summarize([step(0, 1, forward(-1, 100), [loadJob(10, 10, 1e6), loadJob(-1, 10, 5e6)])]).ranks[0];
    expect(rank.untimedSpans).toBe(2);
    expect(rank.forwards).toEqual({ count: 0, busyMs: 0 });
    expect(rank.load).toMatchObject({ jobs: 1, bytes: 1e6, busyMs: 10 });
    expect(rank.load.byForwards.alone?.jobs).toBe(1);
  });

  it('gives a rank with no spans empty totals, null rates and null shares', () => {
    const empty = summarize([], [0, 1]).ranks[1];
    const nothing: CopyDirectionSummary = {
      jobs: 0,
      bytes: 0,
      busyMs: 0,
      gbps: null,
      failedJobs: 0,
      byForwards: { beside: null, alone: null, mixed: null },
      besideForwardsMs: 0,
      besideForwardsShare: null,
      stream: { spanMs: 0, idleMs: 0, idleShare: null, concurrentMs: 0 },
    };
    expect(empty).toEqual({ rank: 1, deviceOpens: 0, forwards: { count: 0, busyMs: 0 }, load: nothing, store: nothing, untimedSpans: 0 });
  });

  it('counts overlapping jobs of one direction in busy time once each, and their overlap apart from the idle time', () => {
    const { load } = summarize([step(0, 1, null, [loadJob(0, 10, 1e6), loadJob(5, 10, 1e6), loadJob(20, 5, 1e6)])]).ranks[0];
    expect(load.busyMs).toBe(25);
    // Covered 0-15 and 20-25 of a 25 ms span: 5 ms idle; 5 ms ran two jobs at once.
    expect(load.stream).toEqual({ spanMs: 25, idleMs: 5, idleShare: 0.2, concurrentMs: 5 });
  });

  it('counts a job the device could not run as failed, with its bytes (none) and its time', () => {
    const failed = job('gpuToCpu', 0, 2, 0, { ok: false, error: 'injected' });
    const { store } = summarize([step(0, 1, null, [failed, storeJob(4, 2, 1e6)])]).ranks[0];
    expect(store).toMatchObject({ jobs: 2, failedJobs: 1, bytes: 1e6, busyMs: 4 });
  });

  it("rides in the trace's otherData", () => {
    const trace = buildDeviceTrace({ spans: ONE_RANK, ranks: [{ rank: 0, deviceName: 'host' }], backend: 'host', label: null });
    expect(trace.otherData.summary).toEqual(summarize(ONE_RANK));
  });

  it('prints a line per rank and direction with each class and the stream idle share', () => {
    const text = formatDeviceTraceSummary(summarize(ONE_RANK, [0, 1]));
    const lines = text.split('\n');
    expect(lines.slice(0, 4)).toEqual([
      'device trace rank 0 loads: 3 jobs, 40.0 MB, 3.33 GB/s; beside forwards 1 job at 2.00 GB/s, alone 1 at 5.00 GB/s, mixed 1 at 3.00 GB/s; ' +
        '50.0% of busy time beside forwards; stream idle 60.0% of its span',
      'device trace rank 0 stores: 1 job, 1.0 MB, 200.0 MB/s; beside forwards none, alone 1 at 200.0 MB/s, mixed none; ' +
        '0.0% of busy time beside forwards; stream idle 0.0% of its span',
      'device trace rank 1 loads: no timed copy jobs',
      'device trace rank 1 stores: no timed copy jobs',
    ]);
    expect(lines[4]).toMatch(/at least 90% of their span beside a forward/);
  });
});
