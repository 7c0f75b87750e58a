import { describe, expect, it } from 'vitest';
import type { CopyJobSpan, ForwardSpan } from '../../src/protocol/step-protocol.js';
import { buildDeviceTrace } from '../../src/report/device-trace.js';
import { summarizeDeviceTrace, type CopyDirectionSummary } from '../../src/report/device-trace-summary.js';
import { formatDeviceTraceSummary } from '../../src/report/report-format.js';
import type { RecordedDeviceSpans } from '../../src/runtime/device-span-recorder.js';

/** The host side a device leaves unmeasured, unless given. */
const UNMEASURED = { submitMs: -1, enqueueMs: -1 };

function forward(startMs: number, elapsedMs: number, host: { submitMs: number; enqueueMs: number } = UNMEASURED): ForwardSpan {
  return { requests: 1, tokens: 4, startMs, elapsedMs, ...host };
}

let nextJobId = 1;

function job(direction: CopyJobSpan['direction'], startMs: number, elapsedMs: number, bytes: number, extra: Partial<CopyJobSpan> = {}): CopyJobSpan {
  const copyJobId = nextJobId++;
  return { copyJobId, transferJobIds: [copyJobId], direction, bytes, ok: true, startMs, elapsedMs, ...UNMEASURED, ...extra };
}

const loadJob = (startMs: number, elapsedMs: number, bytes: number, extra: Partial<CopyJobSpan> = {}) =>
  job('cpuToGpu', startMs, elapsedMs, bytes, extra);
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

/** The host side of no spans at all. */
const NO_HOST_SIDE = {
  enqueue: { spans: 0, unmeasured: 0, totalMs: 0, meanMs: null, busyShare: null },
  queued: { spans: 0, unmeasured: 0, meanMs: null },
};

/**
 * ONE_RANK's forwards and loads with their host side: forwards submitted 1
 * and 0.5 ms before their starts with 0.5 and 0.25 ms of host enqueue; the
 * load beside a forward (12-16) submitted at 11 with 1 ms of enqueue; two
 * alone, one (22-26) submitted at 21.75 with 0.5 ms, one (50-54) whose
 * submit the host clock puts 0.25 ms after its start and whose enqueue was
 * not measured; the mixed one (38-42) with 2 ms of enqueue and no submit time.
 */
const HOST_SIDE = [
  step(0, 1, forward(10, 10, { submitMs: 9, enqueueMs: 0.5 }), [
    loadJob(12, 4, 8e6, { submitMs: 11, enqueueMs: 1 }),
  ]),
  step(0, 2, forward(30, 10, { submitMs: 29.5, enqueueMs: 0.25 }), [
    loadJob(22, 4, 20e6, { submitMs: 21.75, enqueueMs: 0.5 }),
    loadJob(38, 4, 12e6, { submitMs: -1, enqueueMs: 2 }),
  ]),
  step(0, 3, null, [loadJob(50, 4, 4e6, { submitMs: 50.25, enqueueMs: -1 })]),
];

describe("the device trace's summary", () => {
  it('puts a load inside a forward beside it, one between forwards alone and one half over a forward mixed, each at its own rate', () => {
    const { load } = summarize(ONE_RANK).ranks[0];
    expect(load.byForwards.beside).toMatchObject({ jobs: 1, bytes: 8e6, busyMs: 4, gbps: expect.closeTo(2, 12) });
    expect(load.byForwards.alone).toMatchObject({ jobs: 1, bytes: 20e6, busyMs: 4, gbps: expect.closeTo(5, 12) });
    expect(load.byForwards.mixed).toMatchObject({ jobs: 1, bytes: 12e6, busyMs: 4, gbps: expect.closeTo(3, 12) });
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
    expect(store.byForwards).toMatchObject({ beside: null, alone: { jobs: 1, bytes: 1e6, busyMs: 5, gbps: expect.closeTo(0.2, 12) }, mixed: null });
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
    expect(rank.forwards).toEqual({ count: 0, busyMs: 0, host: NO_HOST_SIDE });
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
      host: NO_HOST_SIDE,
    };
    expect(empty).toEqual({ rank: 1, deviceOpens: 0, forwards: { count: 0, busyMs: 0, host: NO_HOST_SIDE }, load: nothing, store: nothing, untimedSpans: 0 });
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

  it("gives each class of loads its host enqueue time, that time's share of the class's busy time and its mean queued time", () => {
    const { beside, alone, mixed } = summarize(HOST_SIDE).ranks[0].load.byForwards;
    expect(beside?.host).toEqual({
      enqueue: { spans: 1, unmeasured: 0, totalMs: 1, meanMs: 1, busyShare: 0.25 },
      queued: { spans: 1, unmeasured: 0, meanMs: 1 },
    });
    // The share counts only the busy time of the job whose enqueue was measured (22-26).
    expect(alone?.host).toEqual({
      enqueue: { spans: 1, unmeasured: 1, totalMs: 0.5, meanMs: 0.5, busyShare: 0.125 },
      queued: { spans: 2, unmeasured: 0, meanMs: 0 },
    });
    expect(mixed?.host).toEqual({
      enqueue: { spans: 1, unmeasured: 0, totalMs: 2, meanMs: 2, busyShare: 0.5 },
      queued: { spans: 0, unmeasured: 1, meanMs: null },
    });
  });

  it("totals a direction's host side over its measured jobs, counting the unmeasured apart", () => {
    const { host } = summarize(HOST_SIDE).ranks[0].load;
    expect(host.enqueue).toEqual({ spans: 3, unmeasured: 1, totalMs: 3.5, meanMs: expect.closeTo(3.5 / 3, 12), busyShare: expect.closeTo(3.5 / 12, 12) });
    // 1, 0.25 and -0.25 ms: a start the host clock puts before its submit is kept as it is.
    expect(host.queued).toEqual({ spans: 3, unmeasured: 1, meanMs: expect.closeTo(1 / 3, 12) });
  });

  it("gives the rank's forwards their mean host enqueue and queued times", () => {
    const { forwards } = summarize(HOST_SIDE).ranks[0];
    expect(forwards.host).toEqual({
      enqueue: { spans: 2, unmeasured: 0, totalMs: 0.75, meanMs: 0.375, busyShare: 0.0375 },
      queued: { spans: 2, unmeasured: 0, meanMs: 0.75 },
    });
  });

  it('leaves the host side of an untimed span out of every figure, unmeasured or not', () => {
    const rank = summarize([step(0, 1, null, [loadJob(-1, 4, 1e6, { submitMs: 3, enqueueMs: 1 }), loadJob(10, 4, 1e6, { submitMs: 9, enqueueMs: 2 })])]).ranks[0];
    expect(rank.load.host).toEqual({
      enqueue: { spans: 1, unmeasured: 0, totalMs: 2, meanMs: 2, busyShare: 0.5 },
      queued: { spans: 1, unmeasured: 0, meanMs: 1 },
    });
  });

  it('prints the host enqueue share and mean queued time after each direction, and a line for the forwards', () => {
    const lines = formatDeviceTraceSummary(summarize(HOST_SIDE)).split('\n');
    expect(lines[0]).toMatch(/; host enqueue 29\.2% of busy time, queued before start mean 0\.33 ms$/);
    expect(lines[1]).toMatch(/^device trace rank 0 stores: no timed copy jobs$/);
    expect(lines[2]).toBe('device trace rank 0 forwards: 2 timed, host enqueue mean 0.38 ms, queued before start mean 0.75 ms');
  });

  it("rides in the trace's otherData", () => {
    const trace = buildDeviceTrace({ spans: ONE_RANK, ranks: [{ rank: 0, deviceName: 'host' }], backend: 'host', label: null });
    expect(trace.otherData.summary).toEqual(summarize(ONE_RANK));
  });

  it('prints a line per rank and direction with each class and the stream idle share', () => {
    const text = formatDeviceTraceSummary(summarize(ONE_RANK, [0, 1]));
    const lines = text.split('\n');
    expect(lines.slice(0, 6)).toEqual([
      'device trace rank 0 loads: 3 jobs, 40.0 MB, 3.33 GB/s; beside forwards 1 job at 2.00 GB/s, alone 1 at 5.00 GB/s, mixed 1 at 3.00 GB/s; ' +
        '50.0% of busy time beside forwards; stream idle 60.0% of its span; host side not measured',
      'device trace rank 0 stores: 1 job, 1.0 MB, 200.0 MB/s; beside forwards none, alone 1 at 200.0 MB/s, mixed none; ' +
        '0.0% of busy time beside forwards; stream idle 0.0% of its span; host side not measured',
      'device trace rank 0 forwards: 2 timed; host side not measured',
      'device trace rank 1 loads: no timed copy jobs',
      'device trace rank 1 stores: no timed copy jobs',
      'device trace rank 1 forwards: no timed forwards',
    ]);
    expect(lines[6]).toMatch(/at least 90% of their span beside a forward/);
  });
});
