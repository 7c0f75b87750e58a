import { describe, expect, it } from 'vitest';
import { WorkerConnector } from '../../src/connector/worker-connector.js';
import type { Device } from '../../src/device/types.js';
import type { OffloadStepMetadata, TransferJobSpec } from '../../src/protocol/step-protocol.js';
import { openTestDevice } from '../device/helpers.js';

/**
 * The worker side's waits on a real (host) device whose jobs fail on the
 * device and finish after random delays: the preemption flush and the drain
 * before a reset return, and every job is collected once, failed loads with
 * their blocks reported invalid.
 */

function store(jobId: number, reqId: string, block: number): TransferJobSpec {
  return { jobId, reqId, direction: 'gpuToCpu', gpuBlockIds: [block], cpuBlockIds: [block], firstSubBlock: 0, fence: false };
}

function load(jobId: number, reqId: string, block: number): TransferJobSpec {
  return { jobId, reqId, direction: 'cpuToGpu', gpuBlockIds: [8 + block], cpuBlockIds: [block], firstSubBlock: 0, fence: false };
}

function meta(stores: TransferJobSpec[], loads: TransferJobSpec[] = []): OffloadStepMetadata {
  return { flushReqIds: [], stores, loads };
}

async function failingDevice(seed: number): Promise<Device> {
  const device = await openTestDevice();
  device.setFaults({ jobErrorProbability: 0.5, delayJitterMs: 2, seed });
  return device;
}

describe('the worker side over jobs that fail on the device', () => {
  it('flushes a preempted request\'s stores and collects every job once, failed ones not ok', async () => {
    for (let seed = 1; seed <= 20; seed++) {
      const device = await failingDevice(seed);
      try {
        const connector = new WorkerConnector(device, { recordTransfers: true });
        connector.queueStores(1, meta([store(1, 'a', 0), store(2, 'a', 1), store(3, 'b', 2)]));
        await connector.flushPreempted(2, ['a']);
        connector.startTransfers(2, meta([], [load(4, 'b', 3)]));
        await connector.waitJobs([1, 2, 3, 4]);
        const out = connector.collect();
        expect(out.finishedJobs.map((j) => j.jobId).sort()).toEqual([1, 2, 3, 4]);
        expect(connector.pendingCount()).toBe(0);
        const failedLoad = out.finishedJobs.find((j) => j.jobId === 4 && !j.ok);
        expect(out.invalidBlockIds).toEqual(failedLoad ? [11] : []);
        // The flushed stores went out as one copy job; a copy job that failed fails every job it carried.
        const copyJobOf = new Map(connector.transferLog().map((e) => [e.jobId, e.copyJobId]));
        expect(copyJobOf.get(2)).toBe(copyJobOf.get(1));
        const failedCopyJobs = new Set(out.finishedJobs.filter((j) => !j.ok).map((j) => copyJobOf.get(j.jobId)));
        expect(failedCopyJobs.size).toBe(device.faultCounters().jobsFailedOnDevice);
        for (const job of out.finishedJobs) expect(job.ok).toBe(!failedCopyJobs.has(copyJobOf.get(job.jobId)));
      } finally {
        device.close();
      }
    }
  });

  it('drains every in-flight job before a reset', async () => {
    for (let seed = 1; seed <= 20; seed++) {
      const device = await failingDevice(seed);
      try {
        const connector = new WorkerConnector(device);
        connector.startTransfers(1, meta([], [load(1, 'a', 0), load(2, 'b', 1)]));
        connector.queueStores(1, meta([store(3, 'c', 2)]));
        connector.startTransfers(2, meta([]));
        await connector.drainAndReset();
        expect(device.pendingJobs()).toBe(0);
        expect(connector.state()).toEqual({ inFlightJobs: 0, deferredStores: 0, loadingBlocks: 0, finishingRequests: 0 });
      } finally {
        device.close();
      }
    }
  });
});
