import type { RunReport } from '../report.js';
import { configurationRows } from '../run-configuration.js';
import { renderPage, type ReportSection } from './page.js';
import { renderChartSvg, type ChartSpec } from './render-chart.js';

/** One interval of a run's sampled counters: prompt tokens served by each tier and bytes moved each way. */
export interface TimelineInterval {
  /** Seconds from the start of the run to the end of the interval. */
  readonly endSeconds: number;
  readonly seconds: number;
  /** Prompt tokens received in the interval. */
  readonly promptTokens: number;
  /**
   * Prompt tokens reached (served or computed the first time) in the interval: every hit is one of
   * them, counted at the same moment, so the hits of an interval never exceed it.
   */
  readonly promptReachedTokens: number;
  readonly gpuHitTokens: number;
  readonly cpuTierHitTokens: number;
  readonly bytesGpuToCpu: number;
  readonly bytesCpuToGpu: number;
}

/**
 * `kvtier run --html`: one run, or the two runs of --compare, as pictures:
 * the TTFT distribution, the share of prompt tokens each tier served over
 * time, and the transfer rates over time.
 */

export interface RunForReport {
  /** 'offload off', 'offload on'. */
  readonly label: string;
  readonly report: RunReport;
  /** Time to first token of every request that produced one (ms). */
  readonly ttftMs: readonly number[];
  readonly timeline: readonly TimelineInterval[];
}

const WIDTH = 640;

/** Empirical CDF points of `values` (at most ~400 per run, evenly spaced in rank). */
function cdfPoints(values: readonly number[]): { ms: number; share: number }[] {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const step = Math.max(1, Math.floor(n / 400));
  const points: { ms: number; share: number }[] = [];
  for (let i = 0; i < n; i += step) points.push({ ms: Math.max(sorted[i], 0.01), share: (i + 1) / n });
  if (n > 0 && points[points.length - 1].share !== 1) points.push({ ms: Math.max(sorted[n - 1], 0.01), share: 1 });
  return points;
}

export function ttftCdfSpec(runs: readonly RunForReport[]): ChartSpec {
  const values = runs.flatMap((run) => cdfPoints(run.ttftMs).map((p) => ({ ...p, run: run.label })));
  return {
    title: 'Time to first token (CDF)',
    width: WIDTH,
    height: 260,
    data: { values },
    mark: { type: 'line', interpolate: 'step-after' },
    encoding: {
      x: { field: 'ms', type: 'quantitative', title: 'TTFT (ms)', scale: { type: 'log' } },
      y: { field: 'share', type: 'quantitative', title: 'share of requests', axis: { format: '.0%' } },
      color: { field: 'run', type: 'nominal', title: 'run', scale: { domain: runs.map((r) => r.label) } },
    },
  } as ChartSpec;
}

export function hitSharesSpec(runs: readonly RunForReport[]): ChartSpec {
  const values = runs.flatMap((run) =>
    run.timeline
      .filter((i) => i.promptReachedTokens > 0)
      .flatMap((i) => [
        { seconds: i.endSeconds, share: i.gpuHitTokens / i.promptReachedTokens, series: `${run.label}: GPU prefix` },
        // Without a CPU tier its share is zero throughout: no line for it.
        ...(run.report.offload ? [{ seconds: i.endSeconds, share: i.cpuTierHitTokens / i.promptReachedTokens, series: `${run.label}: CPU tier` }] : []),
      ]),
  );
  return {
    title: 'Prompt tokens served by each tier over time',
    width: WIDTH,
    height: 240,
    data: { values },
    mark: { type: 'line', point: { size: 12 } },
    encoding: {
      x: { field: 'seconds', type: 'quantitative', title: 'time (s)' },
      y: { field: 'share', type: 'quantitative', title: 'share of prompt tokens reached', axis: { format: '.0%' }, scale: { domain: [0, 1] } },
      color: { field: 'series', type: 'nominal', title: 'tier' },
    },
  } as ChartSpec;
}

export function transferRatesSpec(runs: readonly RunForReport[]): ChartSpec {
  const values = runs.filter((run) => run.report.offload).flatMap((run) =>
    run.timeline.flatMap((i) => [
      { seconds: i.endSeconds, mbps: i.bytesGpuToCpu / 1e6 / i.seconds, series: `${run.label}: GPU->CPU` },
      { seconds: i.endSeconds, mbps: i.bytesCpuToGpu / 1e6 / i.seconds, series: `${run.label}: CPU->GPU` },
    ]),
  );
  return {
    title: 'Transfer rates over time',
    width: WIDTH,
    height: 240,
    data: { values },
    mark: { type: 'line' },
    encoding: {
      x: { field: 'seconds', type: 'quantitative', title: 'time (s)' },
      y: { field: 'mbps', type: 'quantitative', title: 'MB/s' },
      color: { field: 'series', type: 'nominal', title: 'direction' },
    },
  } as ChartSpec;
}

export async function runReportHtml(runs: readonly RunForReport[]): Promise<string> {
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const ms = (x: number | null) => (x === null ? '-' : x.toFixed(1));
  const sections: ReportSection[] = [
    { heading: 'TTFT', svg: await renderChartSvg(ttftCdfSpec(runs)) },
    {
      heading: 'Hit shares',
      text:
        'Per interval, the share of the prompt tokens requests reached (served or computed for the first time) that the GPU prefix cache ' +
        'and the CPU tier served; the rest was computed. A hit is counted when its request uses it, together with the prompt token it ' +
        'reaches, so the shares of an interval add up to at most 100%. Tokens a request reads again after a preemption are not hits.',
      svg: await renderChartSvg(hitSharesSpec(runs)),
    },
    runs.some((run) => run.report.offload)
      ? { heading: 'Transfers', text: 'Bytes moved per interval between the GPU pool and the CPU tier, over all ranks.', svg: await renderChartSvg(transferRatesSpec(runs)) }
      : { heading: 'Transfers', text: 'No CPU tier: nothing was transferred.' },
    {
      heading: 'Summary',
      table: {
        header: ['run', 'requests', 'wall s', 'prefill computed', 'recomputed', 'GPU hit tokens', 'CPU hit tokens', 'reread tokens', 'TTFT p50 ms', 'TTFT p99 ms', 'integrity'],
        rows: runs.map(({ label, report: r }) => [
          label, n(r.requests.total), r.wallSeconds.toFixed(2), n(r.tokens.prefillComputed), n(r.tokens.recomputed),
          n(r.hits.gpuPrefixTokens), n(r.hits.cpuTierTokens), n(r.rereads.gpuPrefixTokens + r.rereads.cpuTierTokens),
          ms(r.latency.ttftMs.p50), ms(r.latency.ttftMs.p99), `${r.integrity.checked - r.integrity.mismatches}/${r.integrity.checked}`,
        ]),
      },
    },
  ];
  const configured = runs.filter((run) => run.report.configuration !== null);
  if (configured.length > 0) {
    const perRun = configured.map((run) => new Map(configurationRows(run.report.configuration!)));
    // Runs may list different settings (a remote tier only with the CPU tier on): rows by label, in first-seen order.
    const labels = [...new Set(perRun.flatMap((rows) => [...rows.keys()]))];
    sections.push({
      heading: 'Configuration',
      text: 'What each run resolved to, every default applied.',
      table: {
        header: ['setting', ...configured.map((run) => run.label)],
        rows: [
          ...labels.map((label) => [label, ...perRun.map((rows) => rows.get(label) ?? '-')]),
          ['step clock', ...configured.map((run) => run.report.configuration!.stepClock)],
        ],
      },
    });
  }
  const first = runs[0].report;
  return renderPage({
    title: 'kvtier run',
    summary: [`${first.backend} backend, tp ${first.tp}${first.workload === null ? "" : `, ${first.workload}`}`],
    sections,
  });
}
