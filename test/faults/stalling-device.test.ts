import { describe, expect, it } from 'vitest';
import type { ForwardBatch, TransferSubmission } from '../../src/device/types.js';
import { StallingDevice } from '../../src/faults/stalling-device.js';
import { SimulatedDevice } from '../../src/sim/simulated-device.js';
import { TINY_NO_COMPUTE } from '../support/tiny.js';

/** A step-clocked device (a job lands when waited for) behind the stall, and the inner device to see what started. */
function stallingDevice(): { device: StallingDevice; inner: SimulatedDevice } {
  const inner = new SimulatedDevice({ shape: TINY_NO_COMPUTE, blockSize: 4, numGpuBlocks: 8, numCpuBlocks: 8, offloadFactor: 1 });
  return { device: new StallingDevice(inner), inner };
}

function load(jobId: number, block: number, after?: number[]): TransferSubmission {
  return { jobId, direction: 'cpuToGpu', gpuBlockIds: [block], cpuBlockIds: [block], ...(after ? { after } : {}) };
}

/** One request reading GPU block `block`. */
function readingBlock(block: number): ForwardBatch {
  return {
    numRequests: 1,
    blockTableOffsets: Int32Array.of(0, 1),
    blockTables: Int32Array.of(block),
    startPositions: Int32Array.of(0),
    tokenOffsets: Int32Array.of(0, 1),
    tokens: Int32Array.of(7),
    sample: Uint8Array.of(1),
  };
}

/** Lets every settled promise run its callbacks. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

describe('a device whose transfers stall', () => {
  it('passes transfers straight through while no stall is set', () => {
    const { device, inner } = stallingDevice();
    device.submitTransfer(load(1, 0));
    expect(inner.pendingJobs()).toBe(1);
    expect(device.pendingJobs()).toBe(1);
  });

  it('holds transfers back while stalled and counts them as pending', () => {
    const { device, inner } = stallingDevice();
    device.setFaults({ stallTransfers: true });
    device.submitTransfer(load(1, 0));
    device.submitTransfer(load(2, 1));
    expect(inner.pendingJobs()).toBe(0);
    expect(device.pendingJobs()).toBe(2);
  });

  it('does not start a held transfer for a wait while the stall lasts', async () => {
    const { device, inner } = stallingDevice();
    device.setFaults({ stallTransfers: true });
    device.submitTransfer(load(1, 0));
    let waited = false;
    void device.waitJobs([1]).then(() => (waited = true));
    await settle();
    expect({ started: inner.pendingJobs(), waited }).toEqual({ started: 0, waited: false });
  });

  it('starts held transfers in submission order for a forward that needs one of them, and then ends the waits on it', async () => {
    const { device, inner } = stallingDevice();
    device.setFaults({ stallTransfers: true });
    device.submitTransfer(load(1, 0));
    device.submitTransfer(load(2, 1));
    device.submitTransfer(load(3, 2));
    const waited = device.waitJobs([2]);
    await device.forward(readingBlock(1), { after: [2] });
    await waited;
    // Jobs 1 and 2 started (2 waited for 1, in submission order); job 3 is still held.
    expect(device.pendingJobs() - inner.pendingJobs()).toBe(1);
  });

  it('starts a held transfer for a wait once the stall has ended, and every held one at synchronize', async () => {
    const { device, inner } = stallingDevice();
    device.setFaults({ stallTransfers: true });
    device.submitTransfer(load(1, 0));
    device.submitTransfer(load(2, 1));
    device.setFaults({});
    // Ending the stall starts nothing by itself.
    expect(inner.pendingJobs()).toBe(0);
    await device.waitJobs([1]);
    expect(device.pendingJobs() - inner.pendingJobs()).toBe(1);
    await device.synchronize();
    expect(device.pendingJobs()).toBe(0);
  });
});
