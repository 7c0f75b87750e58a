import { describe, expect, it } from 'vitest';
import { describeMachine } from '../../src/bench/machine.js';
import { PatternRandom, blockPattern, runTransferBench, type TransferBenchRow } from '../../src/bench/transfer.js';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { bytesPerGpuBlock } from '../../src/model/shape.js';

describe('the transfer bench', () => {
  it('produces one row per direction, layout and block size, with positive rates and sizes that add up', async () => {
    const seen: TransferBenchRow[] = [];
    const rows = await runTransferBench({
      backend: 'host',
      models: [MODEL_PRESETS.tiny],
      layouts: ['cross-layer', 'per-layer'],
      blockTokens: [16, 64],
      numBlocks: 24,
      repeats: 2,
      onRow: (row) => seen.push(row),
    });
    expect(seen).toEqual(rows);
    expect(rows).toHaveLength(2 * 2 * 3);
    for (const row of rows) {
      const blockBytes = bytesPerGpuBlock(MODEL_PRESETS.tiny, 1, row.blockTokens);
      expect(row.model).toBe('tiny');
      expect([row.tp, row.copyMethod]).toEqual([1, 'auto']);
      expect(row.regionBytes).toBe(row.layout === 'per-layer' ? blockBytes / MODEL_PRESETS.tiny.layers : blockBytes);
      expect(row.blocks).toBe(24);
      expect(row.bytes).toBe((row.direction === 'both' ? 2 : 1) * 24 * blockBytes);
      for (const value of [row.gbps, row.limitGbps, row.ratio]) expect(value).toBeGreaterThan(0);
      expect(row.ratio).toBeCloseTo(row.gbps / row.limitGbps, 9);
    }
    expect(rows.map((r) => `${r.layout}/${r.blockTokens}/${r.direction}`).slice(0, 3)).toEqual([
      'cross-layer/16/gpuToCpu',
      'cross-layer/16/cpuToGpu',
      'cross-layer/16/both',
    ]);
  });

  it('measures each tensor-parallel shard with each copy method, on its own device', async () => {
    const rows = await runTransferBench({
      backend: 'host',
      models: [MODEL_PRESETS.small],
      layouts: ['per-layer'],
      blockTokens: [16],
      numBlocks: 8,
      repeats: 1,
      tps: [1, 4],
      copyMethods: ['kernel', 'dma'],
    });
    const shards = [...new Set(rows.map((r) => `${r.tp}/${r.copyMethod}/${r.regionBytes}`))];
    const region = (tp: number) => bytesPerGpuBlock(MODEL_PRESETS.small, tp, 16) / MODEL_PRESETS.small.layers;
    expect(shards).toEqual([`1/kernel/${region(1)}`, `1/dma/${region(1)}`, `4/kernel/${region(4)}`, `4/dma/${region(4)}`]);
    expect(region(4) * 4).toBe(region(1));
    for (const row of rows) expect(row.ratio).toBeGreaterThan(0);
  });

  it('refuses a shard the model cannot be split into, and an unknown copy method', async () => {
    const base = {
      backend: 'host' as const,
      models: [MODEL_PRESETS.tiny],
      layouts: ['per-layer' as const],
      blockTokens: [16],
      numBlocks: 4,
      repeats: 1,
    };
    await expect(runTransferBench({ ...base, tps: [1, 8] })).rejects.toThrow("transfer bench: tp: invalid value 8: the tiny model's 4 KV heads must split evenly over the ranks");
    await expect(runTransferBench({ ...base, copyMethods: ['fast' as never] })).rejects.toThrow(
      "copyMethods: 'fast' must be 'kernel', 'dma' or 'auto'",
    );
  });

  it('sizes runs from totalBytes in whole blocks', async () => {
    const blockBytes = bytesPerGpuBlock(MODEL_PRESETS.small, 2, 32);
    const rows = await runTransferBench({
      backend: 'host',
      models: [MODEL_PRESETS.small],
      layouts: ['per-layer'],
      blockTokens: [32],
      totalBytes: 10 * blockBytes + 1,
      repeats: 1,
      tps: [2],
    });
    expect(rows.map((r) => r.blocks)).toEqual([10, 10, 10]);
  });

  it('refuses options that name no size or both sizes', async () => {
    const base = {
      backend: 'host' as const,
      models: [MODEL_PRESETS.tiny],
      layouts: ['per-layer' as const],
      blockTokens: [16],
      repeats: 1,
    };
    await expect(runTransferBench(base)).rejects.toThrow('exactly one of numBlocks and totalBytes');
    await expect(runTransferBench({ ...base, numBlocks: 0 })).rejects.toThrow('numBlocks = 0');
  });
});

describe('the bench block pattern', () => {
  it('uses every block once, in runs adjacent on both sides', () => {
    const pattern = blockPattern(new PatternRandom(3), 100, 100, 0);
    expect([...pattern.gpuBlockIds].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => 100 + i));
    expect([...pattern.cpuBlockIds].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    let runs = 1;
    for (let i = 1; i < 100; i++) {
      const gpuAdjacent = pattern.gpuBlockIds[i] === pattern.gpuBlockIds[i - 1] + 1;
      const cpuAdjacent = pattern.cpuBlockIds[i] === pattern.cpuBlockIds[i - 1] + 1;
      if (!gpuAdjacent || !cpuAdjacent) runs++;
    }
    // Runs of 1..8 blocks: neither one big copy nor one copy per block.
    expect(runs).toBeGreaterThan(100 / 8);
    expect(runs).toBeLessThan(100 / 2);
  });
});

describe('the machine description', () => {
  it('names the CPU, memory, Node and OS, and no GPU on the host backend', () => {
    const machine = describeMachine('host');
    expect(machine.cpu).toMatch(/\(\d+ cores\)$/);
    expect(machine.memoryGiB).toBeGreaterThan(0);
    expect(machine.gpu).toBeNull();
    expect(machine.driver).toBeNull();
    expect(machine.node).toBe(process.version);
    expect(machine.os.length).toBeGreaterThan(0);
  });
});
