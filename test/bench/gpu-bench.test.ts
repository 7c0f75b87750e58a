import { describe, expect, it } from 'vitest';
import { judgeGoals, runGpuBench, STRESS_RUNS, type GpuCompare, type GpuOverlapRow } from '../../src/bench/gpu.js';
import type { TransferBenchRow } from '../../src/bench/transfer.js';

/** A transfer row of the auto method with the given region and ratio. */
function transferRow(regionBytes: number, direction: TransferBenchRow['direction'], ratio: number): TransferBenchRow {
  return {
    direction,
    layout: 'cross-layer',
    blockTokens: 16,
    model: 'tiny',
    tp: 1,
    regionBytes,
    copyMethod: 'auto',
    blocks: 8,
    bytes: 8 * regionBytes,
    gbps: 50 * ratio,
    limitGbps: 50,
    ratio,
  };
}

function overlapRow(deviceSlowdown: number, copyShare: number): GpuOverlapRow {
  return {
    model: 'small',
    layout: 'per-layer',
    blockTokens: 16,
    copyMethod: 'auto',
    transfers: 'both',
    batch: 16,
    contextTokens: 256,
    cpuTierBytes: 128 * 2 ** 20,
    scatteredCpuBlocks: false,
    newTokens: 1,
    steps: 4,
    stepMsAlone: 1,
    stepMsWithTransfers: 1.5,
    // The wall clock adds the JS wake-up: the goal reads the device-timed step.
    slowdown: 0.5,
    deviceStepMsAlone: 1,
    deviceStepMsWithTransfers: 1 + deviceSlowdown,
    deviceSlowdown,
    storeGbps: 50 * copyShare,
    loadGbps: 50 * copyShare,
    limitGbps: 50,
    copyBusyShare: 1,
    jobMiB: 16,
  };
}

function compareOf(storeGbps: number, mismatches: number, loadGbps: number | null = storeGbps): GpuCompare {
  const run = { requests: 8, failed: 0, integrityChecked: 8, integrityMismatches: mismatches, ttftP50Ms: 1, ttftP99Ms: 2, wallSeconds: 1 };
  return {
    model: 'llama-8b',
    offloadOff: { ...run, cpuHitTokens: 0, prefillComputedTokens: 4096, storeGbps: null, loadGbps: null },
    offloadOn: { ...run, cpuHitTokens: loadGbps === null ? 0 : 2048, prefillComputedTokens: 2048, storeGbps, loadGbps },
  };
}

const ALL_STRESS = { transfer: STRESS_RUNS, overlap: STRESS_RUNS };

describe('the gpu bench', () => {
  it('runs every part on the host backend at small sizes and says the figures are the host\'s', async () => {
    const lines: string[] = [];
    const report = await runGpuBench({ backend: 'host', onProgress: (line) => lines.push(line) });
    expect([report.backend, report.quick, report.hostFigures]).toEqual(['host', true, true]);
    expect(new Set(report.transfer.map((r) => r.copyMethod))).toEqual(new Set(['kernel', 'dma', 'auto']));
    expect(new Set(report.transfer.map((r) => r.direction))).toEqual(new Set(['gpuToCpu', 'cpuToGpu', 'both']));
    expect(new Set(report.overlap.map((r) => r.layout))).toEqual(new Set(['cross-layer', 'per-layer']));
    expect(new Set(report.overlap.map((r) => r.jobMiB)).size).toBe(2);
    expect(report.stressRuns).toEqual(ALL_STRESS);
    expect(report.failures).toEqual([]);
    for (const run of [report.compare!.offloadOff, report.compare!.offloadOn]) {
      expect(run.integrityChecked).toBe(run.requests);
      expect(run.integrityMismatches).toBe(0);
    }
    // The comparison exercises the load path: the CPU tier serves prompt tokens the other run computed.
    expect(report.compare!.offloadOn.cpuHitTokens).toBeGreaterThan(0);
    expect(report.compare!.offloadOn.loadGbps).not.toBeNull();
    expect(report.compare!.offloadOn.prefillComputedTokens).toBeLessThan(report.compare!.offloadOff.prefillComputedTokens);
    expect(report.goals.map((g) => g.goal)).toHaveLength(8);
    expect(report.goals[0]).toEqual({ goal: 'every part ran to the end', met: true, figure: 'all parts ran' });
    for (const goal of report.goals) expect(goal.figure.length).toBeGreaterThan(0);
    expect(lines.some((l) => l.startsWith('stress:'))).toBe(true);
  });

  it('judges each goal on its own figures', () => {
    const transfer = [
      transferRow(4096, 'gpuToCpu', 0.95),
      transferRow(4096, 'both', 0.79),
      transferRow(1024, 'cpuToGpu', 0.71),
    ];
    const goals = judgeGoals({ transfer, overlap: [overlapRow(0.02, 0.85)], compare: compareOf(45, 0), stressRuns: ALL_STRESS, failures: [] });
    const met = Object.fromEntries(goals.map((g) => [g.goal.split(' ').slice(0, 3).join(' '), g.met]));
    expect(met).toEqual({
      'every part ran': true,
      'forward slowdown <=': true,
      'transfer one way': true,
      'transfer both ways': false,
      'transfer >= 0.70': true,
      'engine store and': true,
      'offload off/on comparison:': true,
      'no hang or': true,
    });
    expect(goals[3].figure).toBe('lowest 0.790 (tiny cross-layer 4 KiB both)');
  });

  it('fails the slowdown, engine rate, integrity and stress goals on figures below them', () => {
    const goals = judgeGoals({
      transfer: [transferRow(4096, 'gpuToCpu', 0.95)],
      overlap: [overlapRow(0.05, 0.9)],
      compare: compareOf(30, 1),
      stressRuns: { transfer: STRESS_RUNS, overlap: STRESS_RUNS - 1 },
      failures: ['stress overlap run 7: overlap bench: transfer job 3 failed on the device: x'],
    });
    const failed = goals.filter((g) => !g.met).map((g) => g.goal.split(' ')[0]);
    // No rows for both ways or small regions: those goals are not met either.
    expect(failed).toEqual(['every', 'forward', 'transfer', 'transfer', 'engine', 'offload', 'no']);
    expect(goals[0].figure).toBe('stress overlap run 7: overlap bench: transfer job 3 failed on the device: x');
    expect(goals.find((g) => g.goal.startsWith('engine'))!.figure).toBe('stores 30.00, loads 30.00 GB/s against 50.00 GB/s (60.0%)');
  });

  it('does not judge the engine rate on a comparison whose CPU tier served nothing, and says why', () => {
    const goals = judgeGoals({
      transfer: [transferRow(4096, 'gpuToCpu', 0.95)],
      overlap: [overlapRow(0.02, 0.9)],
      compare: compareOf(48, 0, null),
      stressRuns: ALL_STRESS,
      failures: [],
    });
    const engine = goals.find((g) => g.goal.startsWith('engine'))!;
    expect(engine).toMatchObject({ met: false, figure: 'no load jobs ran with offload on' });
  });
});
