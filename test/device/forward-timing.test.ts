import { describe, expect, it } from 'vitest';
import { forwardBatch } from '../../src/bench/overlap.js';
import type { Device } from '../../src/device/types.js';
import { fillGpuBlocks, JobIds, load, openTestDevice, store, TINY_NO_COMPUTE } from './helpers.js';

/** A span's end on the device's time axis. */
const endOf = (span: { startMs: number; elapsedMs: number }) => span.startMs + span.elapsedMs;

/** Runs one small forward and returns its span as the device reports it. */
async function timedForward(device: Device) {
  await device.forward(forwardBatch(2, 2, 4, 1, TINY_NO_COMPUTE.vocabSize), { computeNs: 1_000_000 });
  return device.lastForwardDeviceSpan!()!;
}

describe('forward device time', () => {
  it('is null before the first forward, then the last forward\'s time on the device, within its wall time', async () => {
    const device = await openTestDevice();
    try {
      expect(device.lastForwardDeviceMs?.()).toBeNull();
      const batch = forwardBatch(2, 2, 4, 1, TINY_NO_COMPUTE.vocabSize);
      const started = performance.now();
      await device.forward(batch, { computeNs: 2_000_000 });
      const wallMs = performance.now() - started;
      const deviceMs = device.lastForwardDeviceMs!()!;
      // Timed from the forward's start to its end on the device, inside the call's wall time.
      expect(deviceMs).toBeGreaterThan(0);
      expect(deviceMs).toBeLessThanOrEqual(wallMs);
    } finally {
      device.close();
    }
  });
});

describe("the device's time axis", () => {
  it('places each forward after the device opened and after the forward before it, as the compute stream ran them', async () => {
    const device = await openTestDevice();
    try {
      expect(device.lastForwardDeviceSpan?.()).toBeNull();
      const first = await timedForward(device);
      const second = await timedForward(device);
      expect(first.startMs).toBeGreaterThanOrEqual(0);
      // The same forward lastForwardDeviceMs times.
      expect(second.elapsedMs).toBe(device.lastForwardDeviceMs!());
      // One stream runs them in turn; the tolerance is the rounding of ms sums, a nanosecond.
      expect(second.startMs).toBeGreaterThanOrEqual(endOf(first) - 1e-6);
    } finally {
      device.close();
    }
  });

  it('gives a finished copy job its start since the device opened, jobs of one stream in the order it ran them', async () => {
    const device = await openTestDevice();
    try {
      fillGpuBlocks(device, [0, 1]);
      const ids = new JobIds();
      const jobs = [store(ids.take(), [0], [0]), store(ids.take(), [1], [1])];
      for (const job of jobs) device.submitTransfer(job);
      await device.waitJobs(jobs.map((j) => j.jobId));
      const [first, second] = device.pollFinished();
      expect(first.startMs).toBeGreaterThanOrEqual(0);
      expect(second.startMs!).toBeGreaterThanOrEqual(endOf({ startMs: first.startMs!, elapsedMs: first.elapsedMs }) - 1e-6);
    } finally {
      device.close();
    }
  });
});

describe("the host's side of device spans", () => {
  // The host backend's device clock is the host's steady clock, and a stream
  // starts work only once its submit handed it over: a submit never comes
  // after its start there (on a GPU the two clocks may differ a little).
  it('gives a finished copy job its submit time on the device\'s axis, no later than its start, and its host enqueue time', async () => {
    const device = await openTestDevice();
    try {
      fillGpuBlocks(device, [0]);
      const job = store(new JobIds().take(), [0], [0]);
      device.submitTransfer(job);
      await device.waitJobs([job.jobId]);
      const [done] = device.pollFinished();
      expect(done.submitMs!).toBeGreaterThanOrEqual(0);
      expect(done.submitMs!).toBeLessThanOrEqual(done.startMs!);
      expect(done.enqueueMs!).toBeGreaterThanOrEqual(0);
    } finally {
      device.close();
    }
  });

  it('gives a forward its submit time, no later than its start, and its host enqueue time', async () => {
    const device = await openTestDevice();
    try {
      const span = await timedForward(device);
      expect(span.submitMs).toBeGreaterThanOrEqual(0);
      expect(span.submitMs).toBeLessThanOrEqual(span.startMs);
      expect(span.enqueueMs).toBeGreaterThanOrEqual(0);
    } finally {
      device.close();
    }
  });

  it('orders submit times as the jobs and the forward were submitted, on one stream and across streams', async () => {
    const device = await openTestDevice();
    try {
      fillGpuBlocks(device, [0, 1]);
      const ids = new JobIds();
      const jobs = [store(ids.take(), [0], [0]), store(ids.take(), [1], [1]), load(ids.take(), [3], [2])];
      for (const job of jobs) device.submitTransfer(job);
      const forwarded = device.forward(forwardBatch(2, 2, 4, 1, TINY_NO_COMPUTE.vocabSize), { computeNs: 1_000_000 });
      await Promise.all([device.waitJobs(jobs.map((j) => j.jobId)), forwarded]);
      const finished = new Map(device.pollFinished().map((r) => [r.jobId, r]));
      const submits = [...jobs.map((j) => finished.get(j.jobId)!.submitMs!), device.lastForwardDeviceSpan!()!.submitMs];
      expect(submits.every((t) => t >= 0)).toBe(true);
      expect(submits).toEqual([...submits].sort((a, b) => a - b));
    } finally {
      device.close();
    }
  });
});
