import { describe, expect, it } from 'vitest';
import type { ForwardBatch, TransferSubmission } from '../../src/device/types.js';
import { kvGeometry } from '../../src/core/kv-geometry.js';
import { StallingDevice } from '../../src/faults/stalling-device.js';
import { SimulatedDevice } from '../../src/sim/simulated-device.js';
import { TINY_NO_COMPUTE } from '../support/tiny.js';

/** A step-clocked device (a job lands when waited for) behind the stall, and the inner device to see what started. */
function stallingDevice(): { device: StallingDevice; inner: SimulatedDevice } {
  const inner = new SimulatedDevice({ geometry: kvGeometry({ model: TINY_NO_COMPUTE, tp: 1, blockSize: 4, offloadFactor: 1 }), numGpuBlocks: 8, numCpuBlocks: 8 });
  return { device: new StallingDevice(inner), inner };
}

function load(jobId: number, block: number): TransferSubmission {
  return { jobId, direction: 'cpuToGpu', gpuBlockIds: [block], cpuBlockIds: [block] };
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

/** The held transfers: what the device counts as pending beyond what started. */
function heldCount(device: StallingDevice, inner: SimulatedDevice): number {
  return device.pendingJobs() - inner.pendingJobs();
}

describe('a device whose transfers stall', () => {
  it('passes transfers straight through while no stall is set', () => {
    const { device, inner } = stallingDevice();
    device.submitTransfer(load(1, 0));
    expect(inner.pendingJobs()).toBe(1);
    expect(device.holds(1)).toBe(false);
  });

  it('holds transfers back while stalled and counts them as pending', () => {
    const { device, inner } = stallingDevice();
    device.setFaults({ stall: { steps: null } });
    device.submitTransfer(load(1, 0));
    device.submitTransfer(load(2, 1));
    expect(inner.pendingJobs()).toBe(0);
    expect(device.pendingJobs()).toBe(2);
    expect([device.holds(1), device.holds(2)]).toEqual([true, true]);
  });

  it('starts held transfers in submission order for a forward that needs one of them', async () => {
    const { device, inner } = stallingDevice();
    device.setFaults({ stall: { steps: null } });
    device.submitTransfer(load(1, 0));
    device.submitTransfer(load(2, 1));
    device.submitTransfer(load(3, 2));
    await device.forward(readingBlock(1), { after: [2] });
    // Jobs 1 and 2 started (2 after 1, in submission order); job 3 is still held.
    expect(heldCount(device, inner)).toBe(1);
    expect(device.holds(3)).toBe(true);
  });

  it('starts a held transfer for a wait on it, and every held one at synchronize', async () => {
    const { device, inner } = stallingDevice();
    device.setFaults({ stall: { steps: null } });
    device.submitTransfer(load(1, 0));
    device.submitTransfer(load(2, 1));
    await device.waitJobs([1]);
    expect(heldCount(device, inner)).toBe(1);
    await device.synchronize();
    expect(device.pendingJobs()).toBe(0);
  });

  it('starts a transfer held for some steps at the start of the step it is due at', () => {
    const { device, inner } = stallingDevice();
    device.atStep(10);
    device.setFaults({ stall: { steps: 2 } });
    device.submitTransfer(load(1, 0));
    device.atStep(11);
    device.submitTransfer(load(2, 1));
    expect(heldCount(device, inner)).toBe(2);
    device.atStep(12);
    expect([device.holds(1), device.holds(2)]).toEqual([false, true]);
    device.atStep(13);
    expect(heldCount(device, inner)).toBe(0);
  });

  it('starts what it held before a transfer submitted once the stall is lifted', () => {
    const { device, inner } = stallingDevice();
    device.setFaults({ stall: { steps: null } });
    device.submitTransfer(load(1, 0));
    device.setFaults({});
    device.submitTransfer(load(2, 1));
    expect(inner.pendingJobs()).toBe(2);
    expect(heldCount(device, inner)).toBe(0);
  });
});
