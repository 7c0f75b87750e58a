import { describe, expect, it } from 'vitest';
import { InjectedLoadFailures, RankFaultLedger } from '../../src/faults/fault-ledger.js';
import type { RankStepOutput } from '../../src/protocol/step-protocol.js';

/** One rank's step answer whose finished loads left `failedPerJob` blocks invalid. */
function answer(rank: number, failedPerJob: number[][]): RankStepOutput {
  return {
    rank,
    step: 1,
    sampledReqIds: [],
    digests: [],
    connector: {
      finishedJobs: failedPerJob.map((failedGpuBlockIds, jobId) => ({
        jobId,
        direction: 'cpuToGpu' as const,
        ok: failedGpuBlockIds.length === 0,
        failedGpuBlockIds,
        bytes: 0,
        elapsedMs: 0,
      })),
      finishedSending: [],
      finishedRecving: [],
      invalidBlockIds: failedPerJob.flat(),
    },
    stepMs: 0,
    forwardMs: 0,
  };
}

describe('fault accounting across rank restarts', () => {
  it("a restarted rank's new device counts every open so far and keeps the load failures already spent", () => {
    const ledger = new RankFaultLedger(2);
    expect(ledger.deviceOpened(0)).toEqual({ openCount: 1, loadFailuresBefore: 0 });
    expect(ledger.deviceOpened(1)).toEqual({ openCount: 1, loadFailuresBefore: 0 });
    ledger.stepAnswered(answer(1, [[4, 5], [], [9]]));
    ledger.stepAnswered(answer(0, [[]]));
    expect(ledger.deviceOpened(1)).toEqual({ openCount: 2, loadFailuresBefore: 3 });
    expect(ledger.deviceOpened(0)).toEqual({ openCount: 2, loadFailuresBefore: 0 });
  });

  it('injected failures the device counted before their job was reported are claimed by the next failed job', () => {
    const injected = new InjectedLoadFailures();
    // Two injections counted, but the first failed job reports only one block.
    expect(injected.claim(2, 1)).toBe(1);
    // The next failed job of two blocks: one is the injection left over, one a device error.
    expect(injected.claim(2, 2)).toBe(1);
    // No injection since: a failed block is a device error.
    expect(injected.claim(2, 1)).toBe(0);
  });
});
