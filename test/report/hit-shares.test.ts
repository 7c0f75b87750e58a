import { describe, expect, it } from 'vitest';
import { hitSharesSpec, type RunForReport, type TimelineInterval } from '../../src/report/html/run-report.js';
import type { RunReport } from '../../src/report/report.js';

/**
 * The "hit shares over time" chart of `kvtier run --html` divides each
 * interval's hits by the prompt tokens reached in it (served or computed for
 * the first time), counted at the same moment as the hits: a share never
 * passes 100%, even when the prompts arrived in an earlier interval.
 */

function interval(endSeconds: number, counts: Pick<TimelineInterval, 'promptTokens' | 'promptReachedTokens' | 'gpuHitTokens' | 'cpuTierHitTokens'>): TimelineInterval {
  return { endSeconds, seconds: 0.5, bytesGpuToCpu: 0, bytesCpuToGpu: 0, ...counts };
}

function run(timeline: TimelineInterval[]): RunForReport {
  return { label: 'offload on', report: { offload: true } as RunReport, ttftMs: [], timeline };
}

type Point = { seconds: number; share: number; series: string };

describe('the hit shares chart', () => {
  it('gives each tier its share of the prompt tokens reached in the interval, never of those received', () => {
    const spec = hitSharesSpec([
      run([
        // A burst arrives: its prompts are received now and reached later.
        interval(0.5, { promptTokens: 4000, promptReachedTokens: 1000, gpuHitTokens: 300, cpuTierHitTokens: 200 }),
        // Nothing arrives; the burst is served from the tiers: shares of the 2,000 reached, not of 0 received.
        interval(1, { promptTokens: 0, promptReachedTokens: 2000, gpuHitTokens: 1200, cpuTierHitTokens: 800 }),
        // Received, not reached yet: no point.
        interval(1.5, { promptTokens: 500, promptReachedTokens: 0, gpuHitTokens: 0, cpuTierHitTokens: 0 }),
      ]),
    ]);
    const points = (spec.data as { values: Point[] }).values;
    expect(points).toEqual([
      { seconds: 0.5, share: 0.3, series: 'offload on: GPU prefix' },
      { seconds: 0.5, share: 0.2, series: 'offload on: CPU tier' },
      { seconds: 1, share: 0.6, series: 'offload on: GPU prefix' },
      { seconds: 1, share: 0.4, series: 'offload on: CPU tier' },
    ]);
    for (const seconds of [0.5, 1]) expect(points.filter((p) => p.seconds === seconds).reduce((a, p) => a + p.share, 0)).toBeLessThanOrEqual(1);
  });
});
