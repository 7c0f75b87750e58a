import { SLOW_REPLAY_RATIO, slowReplayWarning, type ReplayLoad } from '../report/replay-load.js';
import type { SweepResult } from './sweep.js';
import { renderPage, type ReportSection } from '../report/html/page.js';
import { renderChartSvg, type ChartSpec } from '../report/html/render-chart.js';

/**
 * The sweep as pictures: CPU-tier hits against capacity per policy with the
 * CPU tier's bound and ceiling (and the GPU+CPU optimum for reference), the
 * reuse-distance histogram of the slice, and each point's share of the bound.
 */

/** Legend and series name of the CPU tier's bound: Belady over what the tier sees behind the GPU tier. */
export const BOUND_SERIES = 'CPU tier bound';
/** Legend and series name of the unbounded CPU tier over the same stream. */
export const CEILING_SERIES = 'unbounded CPU tier';
/** Legend and series name of `kvtier analyze`'s optimum: one cache with no GPU tier in front, GPU and CPU hits together. */
export const GPU_CPU_OPTIMUM_SERIES = 'GPU+CPU optimum';

const REFERENCE_SERIES = [BOUND_SERIES, CEILING_SERIES, GPU_CPU_OPTIMUM_SERIES];

const WIDTH = 640;
const HEIGHT = 300;

/** CPU-tier hit tokens against CPU capacity: one line per policy; the bound, the ceiling and the GPU+CPU optimum dashed. */
export function hitsChartSpec(result: SweepResult): ChartSpec {
  const values = [
    ...result.points.map((p) => ({ cpuBlocks: p.cpuBlocks, hitTokens: p.cpuHitTokens, series: p.policy })),
    ...result.cpuTierBound.map((o) => ({ cpuBlocks: o.cpuBlocks, hitTokens: o.hitTokens, series: BOUND_SERIES })),
    ...result.cpuBlocks.map((cpuBlocks) => ({ cpuBlocks, hitTokens: result.cpuTierCeilingHitTokens, series: CEILING_SERIES })),
    ...result.gpuCpuOptimum.map((o) => ({ cpuBlocks: o.cpuBlocks, hitTokens: o.hitTokens, series: GPU_CPU_OPTIMUM_SERIES })),
  ];
  const series = [...result.policies, ...REFERENCE_SERIES];
  return {
    title: 'CPU-tier hit tokens by CPU capacity',
    width: WIDTH,
    height: HEIGHT,
    data: { values },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'cpuBlocks', type: 'quantitative', title: 'CPU tier capacity (offloaded blocks)', scale: { type: 'log', base: 2, domain: [Math.min(...result.cpuBlocks), Math.max(...result.cpuBlocks)], nice: false }, axis: { values: [...result.cpuBlocks] } },
      y: { field: 'hitTokens', type: 'quantitative', title: 'CPU-tier hit tokens' },
      color: { field: 'series', type: 'nominal', title: 'policy', scale: { domain: series } },
      strokeDash: {
        condition: { test: REFERENCE_SERIES.map((name) => `datum.series === '${name}'`).join(' || '), value: [6, 4] },
        value: [1, 0],
      },
    },
  } as ChartSpec;
}

/** Reuses per reuse-distance bucket (distinct blocks between a block's use and its reuse). */
export function reuseHistogramSpec(result: SweepResult): ChartSpec {
  const values = result.reuseHistogram.map((b) => ({ bucket: b.from === 0 ? '0' : `${b.from}-${b.to - 1}`, from: b.from, count: b.count }));
  return {
    title: 'Reuse distance of offloaded blocks',
    width: WIDTH,
    height: 220,
    data: { values },
    mark: { type: 'bar' },
    encoding: {
      x: { field: 'bucket', type: 'ordinal', title: 'reuse distance (distinct blocks in between)', sort: { field: 'from' } },
      y: { field: 'count', type: 'quantitative', title: 'reuses' },
    },
  } as ChartSpec;
}

/** Each point's share of the CPU tier's bound: grouped bars per capacity, one bar per policy. */
export function shareChartSpec(result: SweepResult): ChartSpec {
  const values = result.points.map((p) => ({
    capacity: String(p.cpuBlocks),
    order: p.cpuBlocks,
    policy: p.policy,
    share: p.shareOfCpuTierBound,
  }));
  return {
    title: 'Share of the CPU tier bound',
    width: WIDTH,
    height: 240,
    data: { values },
    mark: { type: 'bar' },
    encoding: {
      x: { field: 'capacity', type: 'ordinal', title: 'CPU tier capacity (offloaded blocks)', sort: { field: 'order' } },
      xOffset: { field: 'policy', type: 'nominal', scale: { domain: [...result.policies] } },
      y: { field: 'share', type: 'quantitative', title: 'CPU hits / bound', axis: { format: '.0%' }, scale: { domain: [0, 1] } },
      color: { field: 'policy', type: 'nominal', title: 'policy', scale: { domain: [...result.policies] } },
    },
  } as ChartSpec;
}

/** The hits-against-capacity chart alone (e.g. for documentation). */
export async function sweepHitsSvg(result: SweepResult): Promise<string> {
  return renderChartSvg(hitsChartSpec(result));
}

export async function sweepReportHtml(result: SweepResult): Promise<string> {
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const sections: ReportSection[] = [
    {
      heading: 'Hits against capacity',
      text:
        'CPU-tier hit tokens per policy at each capacity, and three dashed references that know the future. ' +
        `"${BOUND_SERIES}": Belady's MIN with bypass over what the CPU tier sees behind the GPU tier in one replay (a tier that stores ` +
        'every computed block and serves none): the lookups past each request\'s GPU hit, counted once per request, and the blocks ' +
        `offered as they are computed; it bounds what a policy can catch at that capacity. "${CEILING_SERIES}": every block stored ` +
        `before and looked up again in that stream hits; no bound exceeds it. "${GPU_CPU_OPTIMUM_SERIES}" (kvtier analyze): one cache ` +
        'with no GPU tier in front, so it counts the GPU prefix cache\'s hits too; no CPU tier reaches it.',
      svg: await renderChartSvg(hitsChartSpec(result)),
    },
    {
      heading: 'Share of the CPU tier bound',
      text: `Each point's CPU-tier hits against "${BOUND_SERIES}" at its capacity: how much of what the tier could catch it caught.`,
      svg: await renderChartSvg(shareChartSpec(result)),
    },
    {
      heading: 'Reuse distance',
      text: 'How many distinct other blocks come between a block\'s use and its reuse: an LRU tier of C blocks catches the reuses below C.',
      svg: await renderChartSvg(reuseHistogramSpec(result)),
    },
    {
      heading: 'Points',
      table: {
        header: ['policy', 'CPU blocks', 'CPU hit tokens', 'GPU hit tokens', 'prefill tokens', 'reread tokens', 'recomputed', 'CPU tier bound', 'of bound',
          'GPU+CPU optimum', 'verified',
          ...(result.mode === 'engine' ? ['TTFT p50 ms', 'TTFT p99 ms'] : [])],
        rows: result.points.map((p) => [
          p.policy, n(p.cpuBlocks), n(p.cpuHitTokens), n(p.gpuPrefixHitTokens), n(p.prefillTokensComputed),
          n(p.cpuRereadTokens + p.gpuPrefixRereadTokens), n(p.recomputedTokens), n(p.cpuTierBoundHitTokens),
          `${(100 * p.shareOfCpuTierBound).toFixed(1)}%`, n(p.gpuCpuOptimalHitTokens),
          `${p.verified}/${p.requests}`,
          ...(result.mode === 'engine' ? [fmt(p.ttftP50Ms), fmt(p.ttftP99Ms)] : []),
        ]),
      },
    },
  ];
  return renderPage({
    title: 'kvtier sweep',
    summary: [
      `trace ${result.trace.file}: ${n(result.trace.requests)} requests, lengths / ${result.trace.tokenScale}, ${n(result.trace.promptTokens)} prompt tokens`,
      `${result.mode} replay, ${n(result.gpuBlocks)} GPU blocks of ${result.blockSize} tokens, offload factor ${result.offloadFactor}`,
      `without a CPU tier: ${n(result.baseline.prefillTokensComputed)} prefill tokens computed, ${n(result.baseline.gpuPrefixHitTokens)} GPU prefix hit tokens`,
      ...(result.clock === null ? [] : [`clock: ${result.clock}`]),
      ...sweepPaceLines(result),
      `an unbounded CPU tier behind the GPU tier hits ${n(result.cpuTierCeilingHitTokens)} tokens (the ceiling of every bound)`,
      result.cpuTierBound.every((b) => b.provenBoundTokens === b.hitTokens)
        ? 'the CPU tier bound is the optimum at every capacity: it equals a bound no policy exceeds'
        : `a bound no policy exceeds: ${result.cpuTierBound.map((b) => n(b.provenBoundTokens)).join(' / ')} tokens (the CPU tier bound is MIN's prefix hits, a strong heuristic)`,
    ],
    sections,
  });
}

/** The replay's load without a CPU tier, and a warning for every point that ran slower than the trace. */
export function sweepPaceLines(result: SweepResult): string[] {
  const load = result.baseline.load;
  if (load === null) return [];
  const lines = [
    `replay load without a CPU tier: span ${(load.replaySpanMs / 1000).toFixed(1)} s for ${(load.traceSpanMs / 1000).toFixed(1)} s of arrivals ` +
      `(pace ${load.paceRatio.toFixed(2)}x), queue wait mean ${(load.meanQueueWaitMs / 1000).toFixed(2)} s p99 ${(load.p99QueueWaitMs / 1000).toFixed(2)} s, ` +
      `TTFT p50 ${load.ttftP50Ms.toFixed(1)} ms p90 ${load.ttftP90Ms.toFixed(1)} ms, ${load.preemptions} preemptions`,
  ];
  const slow = [load, ...result.points.map((p) => p.load)].filter((l): l is ReplayLoad => l !== null && slowReplayWarning(l) !== null);
  if (slow.length > 0) {
    const worst = slow.reduce((a, b) => (b.paceRatio > a.paceRatio ? b : a));
    lines.push(`warning: ${slowReplayWarning(worst)} (${slow.length} of ${result.points.length + 1} replays ran slower than ${SLOW_REPLAY_RATIO}x the trace)`);
  }
  return lines;
}

function fmt(ms: number | null): string {
  return ms === null ? '-' : ms.toFixed(1);
}
