import { parseHTML } from 'linkedom';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SweepResult } from '../../src/bench/sweep.js';
import { BOUND_SERIES, CEILING_SERIES, GPU_CPU_OPTIMUM_SERIES, sweepHitsSvg, sweepReportHtml } from '../../src/bench/sweep-report.js';
import { smallConversationSweep } from '../support/sweep-fixture.js';

/** The report read back as a person would read it: charts by title, their axes, legends and series. */
function chartsOf(html: string) {
  const { document } = parseHTML(html);
  const charts = [...document.querySelectorAll('svg')].map((svg) => ({
    title: svg.querySelector('.role-title-text')?.textContent ?? '',
    axisTitles: [...svg.querySelectorAll('.role-axis-title text')].map((t) => t.textContent),
    axisLabels: [...svg.querySelectorAll('.role-axis-label text')].map((t) => t.textContent),
    legend: [...svg.querySelectorAll('.role-legend-label text')].map((t) => t.textContent),
    lines: svg.querySelectorAll('.mark-line path').length,
    bars: svg.querySelectorAll('.mark-rect path').length,
  }));
  return { document, charts, chart: (title: string) => charts.find((c) => c.title === title) };
}

const POLICIES = ['lru', 'arc', 's3fifo'];
const REFERENCES = [BOUND_SERIES, CEILING_SERIES, GPU_CPU_OPTIMUM_SERIES];
let result: SweepResult;
let html: string;

beforeAll(async () => {
  result = await smallConversationSweep([8, 32, 256], POLICIES);
  html = await sweepReportHtml(result);
});

describe('the sweep report', () => {
  it('draws hits against capacity with one line per policy, the CPU tier bound, its ceiling and the GPU+CPU optimum, on labelled axes', () => {
    const hits = chartsOf(html).chart('CPU-tier hit tokens by CPU capacity');
    expect(hits).toBeDefined();
    expect(hits?.axisTitles).toEqual(['CPU tier capacity (offloaded blocks)', 'CPU-tier hit tokens']);
    expect(hits?.legend).toEqual([...POLICIES, ...REFERENCES]);
    expect(hits?.lines).toBe(POLICIES.length + REFERENCES.length);
    for (const capacity of ['8', '32', '256']) expect(hits?.axisLabels).toContain(capacity);
  });

  it('shows each point\'s share of the CPU tier bound as a bar per policy and capacity, in percent, and no share of the GPU+CPU optimum', () => {
    const { charts, chart } = chartsOf(html);
    const share = chart('Share of the CPU tier bound');
    expect(share?.legend).toEqual(POLICIES);
    expect(share?.bars).toBe(POLICIES.length * 3);
    expect(share?.axisTitles).toEqual(['CPU tier capacity (offloaded blocks)', 'CPU hits / bound']);
    expect(share?.axisLabels).toContain('100%');
    expect(charts.filter((c) => c.title.startsWith('Share'))).toHaveLength(1);
  });

  it('names the bound, the ceiling and the GPU+CPU optimum in the table and the summary', () => {
    const { document } = chartsOf(html);
    const header = [...document.querySelectorAll('table tr')][0].textContent ?? '';
    expect(header).toContain('CPU tier bound');
    expect(header).toContain('GPU+CPU optimum');
    expect(document.body.textContent).toContain(`an unbounded CPU tier behind the GPU tier hits ${result.cpuTierCeilingHitTokens.toLocaleString('en-US')} tokens`);
  });

  it('shows the reuse-distance histogram of the slice', () => {
    const histogram = chartsOf(html).chart('Reuse distance of offloaded blocks');
    expect(histogram?.axisTitles).toEqual(['reuse distance (distinct blocks in between)', 'reuses']);
    expect(histogram?.bars).toBe(result.reuseHistogram.length);
  });

  it('lists every point in a table and needs nothing from outside the file', () => {
    const { document } = chartsOf(html);
    const rows = [...document.querySelectorAll('table tr')];
    expect(rows).toHaveLength(1 + POLICIES.length * 3);
    expect(rows[1].textContent).toContain('lru');
    expect(document.querySelectorAll('script')).toHaveLength(0);
    for (const element of document.querySelectorAll('[src], [href], link')) {
      expect(element.getAttribute('src') ?? element.getAttribute('href') ?? '').not.toMatch(/^(https?:)?\/\//);
    }
  });

  it('renders the hits chart alone as a standalone SVG document', async () => {
    const svg = await sweepHitsSvg(result);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(chartsOf(`<html><body>${svg}</body></html>`).charts[0].legend).toEqual([...POLICIES, ...REFERENCES]);
  });
});
