import { afterEach, describe, expect, it } from 'vitest';
import type { Device } from '../../src/device/types.js';
import { summarizeReplayLoad, slowReplayWarning, SLOW_REPLAY_RATIO } from '../../src/report/replay-load.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import type { StepClock, StepWork } from '../../src/timing/step-cost.js';
import { JobIds, openTestDevice, packBatch, store } from '../device/helpers.js';
import { outputWith, requestFor, tinyConfig } from '../scheduler/helpers.js';

/** A clock that prices a step at 1 us per token and remembers the work it was shown. */
class RecordingClock implements StepClock {
  readonly description = 'recording';
  readonly usesProfile = false;
  readonly seen: StepWork[] = [];
  computeNs(work: StepWork): number {
    this.seen.push({ ...work });
    return work.tokens * 1000;
  }
}

describe('the scheduler on a step clock', () => {
  it('prices each step from the tokens it schedules and the context they attend to', () => {
    const clock = new RecordingClock();
    const scheduler = new Scheduler(tinyConfig({ maxNumBatchedTokens: 8 }), { stepClock: clock });
    scheduler.addRequest(requestFor(scheduler, 'a', { prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], maxTokens: 2 }));
    // A 12-token prompt in chunks of 8: 8 tokens after 0, then 4 after 8.
    const first = scheduler.schedule();
    expect(first.computeNs).toBe(8000);
    scheduler.updateFromOutput(first, outputWith(first));
    const second = scheduler.schedule();
    expect(second.computeNs).toBe(4000);
    expect(clock.seen).toEqual([
      { requests: 1, tokens: 8, sampledTokens: 0, attendedPairs: 36, contextTokens: 8 },
      { requests: 1, tokens: 4, sampledTokens: 1, attendedPairs: 4 * 8 + 10, contextTokens: 12 },
    ]);
  });

  it('leaves the price to the devices when it has no clock', () => {
    const scheduler = new Scheduler(tinyConfig());
    scheduler.addRequest(requestFor(scheduler, 'a', { prompt: [1, 2, 3], maxTokens: 1 }));
    expect(scheduler.schedule().computeNs).toBeUndefined();
  });
});

let device: Device | undefined;
afterEach(() => {
  device?.close();
  device = undefined;
});

describe('the host backend on the step clock', () => {
  it('busies the compute stream for the time the step clock gives a forward', async () => {
    device = await openTestDevice();
    const started = performance.now();
    await device.forward(packBatch([{ blockTable: [0], startPosition: 0, tokens: [5], sample: true }]), { computeNs: 60_000_000 });
    // A lower bound only: a loaded machine can only make it later.
    expect(performance.now() - started).toBeGreaterThanOrEqual(59);
  });

  it('completes a transfer no sooner than the profile\'s host link would have moved its bytes', async () => {
    // Four 1 KiB blocks over a 40,960 B/s link: 100 ms.
    device = await openTestDevice({ hostLink: { oneWayBytesPerSecond: 40_960, bothWaysBytesPerSecond: 81_920, jobLatencyUs: 0, regionOverheadNs: 0 } });
    expect(device.info.bytesPerGpuBlock).toBe(1024);
    const jobs = new JobIds();
    const job = store(jobs.take(), [0, 1, 2, 3], [0, 1, 2, 3]);
    const started = performance.now();
    device.submitTransfer(job);
    await device.waitJobs([job.jobId]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(99);
    const [result] = device.pollFinished();
    expect(result).toMatchObject({ jobId: job.jobId, ok: true });
    expect(result.elapsedMs).toBeGreaterThanOrEqual(99);
  });

  it('refuses a host link or a forward time it cannot use, naming the field', async () => {
    await expect(openTestDevice({ hostLink: { oneWayBytesPerSecond: 0, bothWaysBytesPerSecond: 1, jobLatencyUs: 0, regionOverheadNs: 0 } })).rejects.toThrow(
      /hostLink\.oneWayBytesPerSecond/,
    );
    device = await openTestDevice();
    await expect(device.forward(packBatch([{ blockTable: [0], startPosition: 0, tokens: [5], sample: true }]), { computeNs: -1 })).rejects.toThrow(
      /forward: computeNs/,
    );
  });
});

describe('a replay\'s load', () => {
  const request = (arrivalMs: number, firstScheduledMs: number, finishMs: number) => ({
    arrivalMs, firstScheduledMs, firstTokenMs: firstScheduledMs + 10, finishMs, outputTokens: 5,
  });

  it('measures pace as the replay\'s span over the trace\'s, and queueing from arrival to first schedule', () => {
    const load = summarizeReplayLoad('c', [request(0, 0, 100), request(1000, 1100, 1200)], 2);
    expect(load).toMatchObject({ traceSpanMs: 1000, replaySpanMs: 1200, paceRatio: 1.2, meanQueueWaitMs: 50, preemptions: 2 });
    expect(load.outputTokensPerSecond).toBeCloseTo((10 * 1000) / 1200, 9);
    expect(slowReplayWarning(load)).toBeNull();
  });

  it('warns when the replay ran more than 1.25x slower than the trace: queue-aware policies then see the future', () => {
    const load = summarizeReplayLoad('c', [request(0, 0, 100), request(1000, 3000, 4000)], 0);
    expect(load.paceRatio).toBeGreaterThan(SLOW_REPLAY_RATIO);
    expect(slowReplayWarning(load)).toMatch(/4\.00x slower than the trace .* queue-aware policies see requests a real service would not have yet/);
  });
});
