import type { SweepResult } from './sweep.js';
import { renderPage, type ReportSection } from '../report/html/page.js';
import { renderChartSvg, type ChartSpec } from '../report/html/render-chart.js';

/**
 * The sweep as pictures: CPU-tier hits against capacity per policy with
 * Belady's optimum, the reuse-distance histogram of the slice, and each
 * point's share of the optimum.
 */

/** Legend and series name of the whole-trace optimum's curve (`kvtier analyze`: no GPU tier in front). */
export const OPTIMUM_SERIES = 'Belady optimum';
/** Legend and series name of the optimum over the stream the CPU tier sees behind the GPU tier. */
export const TIER_OPTIMUM_SERIES = 'Belady behind the GPU tier';

const WIDTH = 640;
const HEIGHT = 300;

/** CPU-tier hit tokens against CPU capacity: one line per policy, the two optima dashed. */
export function hitsChartSpec(result: SweepResult): ChartSpec {
  const values = [
    ...result.points.map((p) => ({ cpuBlocks: p.cpuBlocks, hitTokens: p.cpuHitTokens, series: p.policy })),
    ...result.optimum.map((o) => ({ cpuBlocks: o.cpuBlocks, hitTokens: o.hitTokens, series: OPTIMUM_SERIES })),
    ...result.tierOptimum.map((o) => ({ cpuBlocks: o.cpuBlocks, hitTokens: o.hitTokens, series: TIER_OPTIMUM_SERIES })),
  ];
  const series = [...result.policies, OPTIMUM_SERIES, TIER_OPTIMUM_SERIES];
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
        condition: { test: `datum.series === '${OPTIMUM_SERIES}' || datum.series === '${TIER_OPTIMUM_SERIES}'`, value: [6, 4] },
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

/**
 * Each point's share of an optimum (the whole-trace one, or with `behindGpu`
 * the one behind the GPU tier): grouped bars per capacity, one bar per policy.
 */
export function shareChartSpec(result: SweepResult, behindGpu = false): ChartSpec {
  const values = result.points.map((p) => ({
    capacity: String(p.cpuBlocks),
    order: p.cpuBlocks,
    policy: p.policy,
    share: behindGpu ? p.shareOfTierOptimal : p.shareOfOptimal,
  }));
  return {
    title: behindGpu ? 'Share of the Belady optimum behind the GPU tier' : 'Share of the Belady optimum',
    width: WIDTH,
    height: 240,
    data: { values },
    mark: { type: 'bar' },
    encoding: {
      x: { field: 'capacity', type: 'ordinal', title: 'CPU tier capacity (offloaded blocks)', sort: { field: 'order' } },
      xOffset: { field: 'policy', type: 'nominal', scale: { domain: [...result.policies] } },
      y: { field: 'share', type: 'quantitative', title: 'CPU hits / optimum', axis: { format: '.0%' }, scale: { domain: [0, 1] } },
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
        'CPU-tier hit tokens per policy at each capacity, and two dashed optima at that capacity, both knowing the future. ' +
        `"${OPTIMUM_SERIES}" replays the whole trace with no GPU tier in front (kvtier analyze): it also counts hits the GPU prefix cache ` +
        `serves itself, so no online policy reaches it. "${TIER_OPTIMUM_SERIES}" replays only what the CPU tier sees: the lookups past ` +
        'each request\'s GPU hit and the blocks offered for storing, recorded from the replays; it bounds what a policy can catch.',
      svg: await renderChartSvg(hitsChartSpec(result)),
    },
    {
      heading: 'Share of the optimum',
      text: `Each point's CPU-tier hits against "${OPTIMUM_SERIES}" (the figure kvtier analyze gives and the "of optimum" column).`,
      svg: await renderChartSvg(shareChartSpec(result)),
    },
    {
      heading: 'Share of the optimum behind the GPU tier',
      text: `Each point's CPU-tier hits against "${TIER_OPTIMUM_SERIES}": how much of what the tier could catch it caught.`,
      svg: await renderChartSvg(shareChartSpec(result, true)),
    },
    {
      heading: 'Reuse distance',
      text: 'How many distinct other blocks come between a block\'s use and its reuse: an LRU tier of C blocks catches the reuses below C.',
      svg: await renderChartSvg(reuseHistogramSpec(result)),
    },
    {
      heading: 'Points',
      table: {
        header: ['policy', 'CPU blocks', 'CPU hit tokens', 'GPU hit tokens', 'prefill tokens', 'reread tokens', 'recomputed', 'optimum', 'of optimum', 'optimum behind GPU',
          'of optimum behind GPU', 'verified',
          ...(result.mode === 'engine' ? ['TTFT p50 ms', 'TTFT p99 ms'] : [])],
        rows: result.points.map((p) => [
          p.policy, n(p.cpuBlocks), n(p.cpuHitTokens), n(p.gpuPrefixHitTokens), n(p.prefillTokensComputed),
          n(p.cpuRereadTokens + p.gpuPrefixRereadTokens), n(p.recomputedTokens), n(p.optimalCpuHitTokens),
          `${(100 * p.shareOfOptimal).toFixed(1)}%`, n(p.tierOptimalCpuHitTokens), `${(100 * p.shareOfTierOptimal).toFixed(1)}%`,
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
    ],
    sections,
  });
}

function fmt(ms: number | null): string {
  return ms === null ? '-' : ms.toFixed(1);
}
