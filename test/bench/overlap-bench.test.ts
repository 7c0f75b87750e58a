import { describe, expect, it } from 'vitest';
import { forwardBatch, runOverlapBench, type OverlapBenchOptions } from '../../src/bench/overlap.js';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { bytesPerGpuBlock } from '../../src/model/shape.js';

/** The smallest useful run: the tiny model, a few short requests, small jobs, two steps per phase. */
function tinyRun(overrides: Partial<OverlapBenchOptions> = {}): OverlapBenchOptions {
  return {
    backend: 'host',
    models: [MODEL_PRESETS.tiny],
    layouts: ['cross-layer'],
    blockTokens: [16],
    batch: 4,
    contextTokens: 40,
    stepsPerRound: 2,
    rounds: 2,
    jobBytes: 64 * 1024,
    ...overrides,
  };
}

describe('the overlap bench', () => {
  it('times the same forward alone and beside running stores and loads, one row per shape', async () => {
    const seen: unknown[] = [];
    const rows = await runOverlapBench(
      tinyRun({ layouts: ['cross-layer', 'per-layer'], transfers: ['both'], onRow: (row) => seen.push(row) }),
    );
    expect(seen).toEqual(rows);
    expect(rows.map((r) => [r.model, r.layout, r.blockTokens, r.batch, r.contextTokens, r.newTokens, r.steps])).toEqual([
      ['tiny', 'cross-layer', 16, 4, 40, 1, 4],
      ['tiny', 'per-layer', 16, 4, 40, 1, 4],
    ]);
    expect(rows.every((r) => r.transfers === 'both' && r.copyMethod === 'auto')).toBe(true);
    for (const row of rows) {
      expect(row.stepMsAlone).toBeGreaterThan(0);
      expect(row.stepMsWithTransfers).toBeGreaterThan(0);
      expect(row.slowdown).toBeCloseTo(row.stepMsWithTransfers / row.stepMsAlone - 1, 9);
      // The device times each forward too; no JS wake-up is in that time, so it is at most the wall time.
      expect(row.deviceStepMsAlone).toBeGreaterThan(0);
      expect(row.deviceStepMsAlone!).toBeLessThanOrEqual(row.stepMsAlone);
      expect(row.deviceSlowdown).toBeCloseTo(row.deviceStepMsWithTransfers! / row.deviceStepMsAlone! - 1, 9);
      // Both directions moved bytes during the busy phases, and no stream copied longer than the phases lasted.
      expect(row.storeGbps).toBeGreaterThan(0);
      expect(row.loadGbps).toBeGreaterThan(0);
      expect(row.limitGbps).toBeGreaterThan(0);
      expect(row.copyBusyShare).toBeGreaterThan(0);
      expect(row.copyBusyShare).toBeLessThanOrEqual(1);
    }
  });

  it('copies to and from blocks scattered over a CPU tier of the size asked for, and says so in each row', async () => {
    const blockBytes = bytesPerGpuBlock(MODEL_PRESETS.tiny, 1, 16);
    const ring = 4 * Math.floor((64 * 1024) / blockBytes) * blockBytes; // four jobs
    const [adjacent] = await runOverlapBench(tinyRun({ transfers: ['both'] }));
    expect(adjacent.scatteredCpuBlocks).toBe(false);
    expect(adjacent.cpuTierBytes).toBe(2 * ring);
    const [scattered] = await runOverlapBench(tinyRun({ transfers: ['both'], cpuTierBytes: 4 * 2 ** 20 }));
    expect(scattered.scatteredCpuBlocks).toBe(true);
    expect(scattered.cpuTierBytes % blockBytes).toBe(0);
    expect(scattered.cpuTierBytes).toBeLessThanOrEqual(4 * 2 ** 20);
    expect(scattered.cpuTierBytes).toBeGreaterThan(4 * 2 ** 20 - blockBytes);
    expect(scattered.storeGbps).toBeGreaterThan(0);
    expect(scattered.loadGbps).toBeGreaterThan(0);
  });

  it('adds rows with stores only and loads only, in which only that direction moves bytes', async () => {
    const rows = await runOverlapBench(tinyRun());
    expect(rows.map((r) => r.transfers)).toEqual(['both', 'stores', 'loads']);
    const [, stores, loads] = rows;
    expect(stores.storeGbps).toBeGreaterThan(0);
    expect(stores.loadGbps).toBe(0);
    expect(loads.loadGbps).toBeGreaterThan(0);
    expect(loads.storeGbps).toBe(0);
    for (const row of [stores, loads]) {
      expect(row.copyBusyShare).toBeGreaterThan(0);
      expect(row.copyBusyShare).toBeLessThanOrEqual(1);
    }
  });

  it('opens one device per copy method and reports the method of each row', async () => {
    const rows = await runOverlapBench(tinyRun({ copyMethods: ['kernel', 'dma'], transfers: ['loads'] }));
    expect(rows.map((r) => [r.copyMethod, r.transfers])).toEqual([
      ['kernel', 'loads'],
      ['dma', 'loads'],
    ]);
  });

  it('measures prefill-sized steps too', async () => {
    const [row] = await runOverlapBench(tinyRun({ newTokens: 24, contextTokens: 0, transfers: ['both'] }));
    expect(row.newTokens).toBe(24);
    expect(row.contextTokens).toBe(0);
  });

  it('packs a batch whose requests own disjoint block tables and are all sampled', () => {
    const batch = forwardBatch(3, 2, 17, 2, 1000);
    expect(Array.from(batch.blockTableOffsets)).toEqual([0, 2, 4, 6]);
    expect(Array.from(batch.blockTables)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(Array.from(batch.startPositions)).toEqual([17, 17, 17]);
    expect(Array.from(batch.tokenOffsets)).toEqual([0, 2, 4, 6]);
    expect(Array.from(batch.sample)).toEqual([1, 1, 1]);
    expect(Array.from(batch.tokens).every((t) => t >= 0 && t < 1000)).toBe(true);
  });

  it('names the option it refuses', async () => {
    await expect(runOverlapBench(tinyRun({ batch: 0 }))).rejects.toThrow('batch = 0 must be an integer >= 1');
    await expect(runOverlapBench(tinyRun({ layouts: [] }))).rejects.toThrow('layouts must name at least one layout');
    await expect(runOverlapBench(tinyRun({ tp: 3 }))).rejects.toThrow("overlap bench: tp: invalid value 3: the tiny model's 4 KV heads must split evenly over the ranks");
    await expect(runOverlapBench(tinyRun({ copyMethods: ['fast' as never] }))).rejects.toThrow(
      "copyMethods: 'fast' must be 'kernel', 'dma' or 'auto'",
    );
    await expect(runOverlapBench(tinyRun({ transfers: [] }))).rejects.toThrow('transfers must name at least one of both, stores, loads');
  });
});
