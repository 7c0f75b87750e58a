import { describe, expect, it } from 'vitest';
import { forwardBatch } from '../../src/bench/overlap.js';
import { openTestDevice, TINY_NO_COMPUTE } from './helpers.js';

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
