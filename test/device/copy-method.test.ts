import { describe, expect, it } from 'vitest';
import { loadAddon } from '../../src/device/native.js';

/**
 * The CUDA backend's per-job copy method rule (native/src/copy_method.h),
 * the same C++ the backend runs, through the host addon: DMA from 256 KiB
 * regions or beside the model, the copy kernel only for small regions on a
 * device that runs no forwards, explicit methods passed through.
 */
const KiB = 1024;

function choose(requested: string, regionBytes: readonly number[], besideCompute: boolean): string {
  const bytes = regionBytes.reduce((sum, b) => sum + b, 0);
  return loadAddon('host').chooseCopyMethod(requested, bytes, regionBytes.length, besideCompute);
}

describe('the auto copy method', () => {
  it('uses DMA once regions average 256 KiB, the copy kernel below that on a transfer-only device', () => {
    expect(choose('auto', [256 * KiB, 256 * KiB], false)).toBe('dma');
    expect(choose('auto', [2048 * KiB], false)).toBe('dma');
    expect(choose('auto', [256 * KiB - 16, 256 * KiB - 16], false)).toBe('kernel');
    expect(choose('auto', Array<number>(64).fill(2 * KiB), false)).toBe('kernel');
  });

  it('uses DMA for every job while the device runs forwards, small regions included', () => {
    expect(choose('auto', Array<number>(64).fill(2 * KiB), true)).toBe('dma');
    expect(choose('auto', [16 * KiB], true)).toBe('dma');
    expect(choose('auto', [], true)).toBe('dma');
  });

  it('fills a poison-only plan with the copy kernel when nothing computes', () => {
    expect(choose('auto', [], false)).toBe('kernel');
  });

  it('passes an explicit method through whatever the regions', () => {
    expect(choose('kernel', [64 * 1024 * KiB], true)).toBe('kernel');
    expect(choose('dma', [1 * KiB], false)).toBe('dma');
  });

  it('refuses an unknown method, naming the value', () => {
    expect(() => choose('fast', [4 * KiB], false)).toThrow("copyMethod = 'fast' must be 'kernel', 'dma' or 'auto'");
  });
});
