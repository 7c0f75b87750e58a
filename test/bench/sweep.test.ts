import { describe, expect, it } from 'vitest';
import { analyzeTrace } from '../../src/analysis/analyze.js';
import { parseSweepPolicy, runSweep, type SweepResult } from '../../src/bench/sweep.js';
import { sweepPaceLines, sweepReportHtml } from '../../src/bench/sweep-report.js';
import { conversationLines, traceFile } from '../support/sweep-fixture.js';

const TRACE = traceFile(conversationLines());
const SETTINGS = { traceFile: TRACE, maxRequests: 100, tokenScale: 64, gpuBlocks: 16, blockSize: 4, offloadFactor: 1 };

async function sweep(cpuBlocks: number[], policies: string[]): Promise<SweepResult> {
  return runSweep({ ...SETTINGS, cpuBlocks, policies: policies.map(parseSweepPolicy) });
}

describe('runSweep (simulated)', () => {
  it('keeps the modelled clock unless given a fixed step, and says which clock and load each replay ran under', async () => {
    const modelled = await sweep([8], ['lru']);
    expect(modelled.traceMsPerStep).toBeNull();
    expect(modelled.clock).toBe('llama-8b on h100-sxm (modelled)');
    expect(modelled.baseline.load?.traceSpanMs).toBeGreaterThan(0);
    expect(modelled.points[0].load?.clock).toBe(modelled.clock);
    const paced = await runSweep({ ...SETTINGS, cpuBlocks: [8], policies: [parseSweepPolicy('lru')], traceMsPerStep: 250 });
    expect(paced.traceMsPerStep).toBe(250);
    expect(paced.clock).toBe('250 trace ms per step (fixed)');
    await expect(runSweep({ ...SETTINGS, cpuBlocks: [8], policies: [parseSweepPolicy('lru')], traceMsPerStep: 0 })).rejects.toThrow(
      /trace ms per step must be a positive number, got 0/,
    );
  });

  it('warns in the table and the HTML report when a replay ran slower than the trace', async () => {
    // A minute of trace per step: 24 requests 4 s apart take far longer than the trace's 92 s.
    const slow = await runSweep({ ...SETTINGS, cpuBlocks: [8], policies: [parseSweepPolicy('lru')], traceMsPerStep: 60_000 });
    expect(slow.baseline.load?.paceRatio).toBeGreaterThan(1.25);
    const warning = sweepPaceLines(slow).find((line) => line.startsWith('warning:'));
    expect(warning).toMatch(/slower than the trace .*queue-aware policies see requests a real service would not have yet/);
    expect(await sweepReportHtml(slow)).toContain('queue-aware policies see requests a real service would not have yet');
    expect(sweepPaceLines(await sweep([8], ['lru'])).some((line) => line.startsWith('warning:'))).toBe(false);
  });

  it('gives one verified point per capacity and policy, with the GPU+CPU optimum of kvtier analyze at that capacity', async () => {
    const result = await sweep([8, 256], ['lru', 's3fifo', 'reuse:2']);
    expect(result.points.map((p) => `${p.policy}@${p.cpuBlocks}`)).toEqual([
      'lru@8', 's3fifo@8', 'reuse:2@8', 'lru@256', 's3fifo@256', 'reuse:2@256',
    ]);
    for (const cpuBlocks of [8, 256]) {
      const analysis = await analyzeTrace({ trace: TRACE, cpuBlocks, blockSize: 4, tokenScale: 64 });
      expect(result.gpuCpuOptimum.find((o) => o.cpuBlocks === cpuBlocks)?.hitTokens).toBe(analysis.gpuCpuOptimum.hitTokens);
      expect(result.points.filter((p) => p.cpuBlocks === cpuBlocks).every((p) => p.gpuCpuOptimalHitTokens === analysis.gpuCpuOptimum.hitTokens)).toBe(true);
    }
    for (const point of result.points) {
      expect(point.verified).toBe(point.requests);
      expect(point.requests).toBe(24);
      expect(point.shareOfCpuTierBound).toBeCloseTo(point.cpuHitTokens / point.cpuTierBoundHitTokens, 12);
      expect(point.ttftP50Ms).toBeNull();
    }
    // Requests never overlap: every prompt token is computed once or served by a tier.
    for (const point of result.points) {
      expect(point.prefillTokensComputed + point.gpuPrefixHitTokens + point.cpuHitTokens).toBe(result.trace.promptTokens);
    }
    expect(result.reuseHistogram.reduce((sum, b) => sum + b.count, 0)).toBeGreaterThan(0);
  });

  it('finds every returning conversation in a tier large enough to hold the slice, and fewer in a small one', async () => {
    const result = await sweep([8, 256], ['lru']);
    const [small, large] = result.points;
    // Six conversations return with a 32-token previous prompt: 8 blocks of 4 tokens each.
    expect(large.cpuHitTokens).toBe(6 * 32);
    expect(large.cpuHitTokens).toBe(result.cpuTierCeilingHitTokens);
    expect(large.shareOfCpuTierBound).toBe(1);
    expect(small.cpuHitTokens).toBeLessThan(large.cpuHitTokens);
    expect(result.baseline.prefillTokensComputed).toBe(result.trace.promptTokens - result.baseline.gpuPrefixHitTokens);
  });
});

describe('parseSweepPolicy', () => {
  it('reads eviction names, reuse:K and EVICTION/STORE pairs', () => {
    expect(parseSweepPolicy('arc')).toEqual({ label: 'arc', eviction: 'arc', storePolicy: 'on-compute' });
    expect(parseSweepPolicy('reuse:3')).toEqual({ label: 'reuse:3', eviction: 'lru', storePolicy: 'reuse:3' });
    expect(parseSweepPolicy('s3fifo/on-evict')).toEqual({ label: 's3fifo/on-evict', eviction: 's3fifo', storePolicy: 'on-evict' });
  });

  it('names the policy it cannot read', () => {
    expect(() => parseSweepPolicy('fifo')).toThrowError(/policy "fifo": expected lru, arc, lhd, s3fifo, hold, classhold, lru\+queue, s3fifo\+queue, hold\+queue, classhold\+queue, reuse:K/);
    expect(() => parseSweepPolicy('lru/sometimes')).toThrowError(/storePolicy must be/);
    expect(() => parseSweepPolicy('reuse:0')).toThrowError(/storePolicy must be/);
  });
});
