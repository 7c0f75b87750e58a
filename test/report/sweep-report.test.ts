import { parseHTML } from 'linkedom';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SweepResult } from '../../src/bench/sweep.js';
import { OPTIMUM_SERIES, sweepHitsSvg, sweepReportHtml } from '../../src/bench/sweep-report.js';
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
let result: SweepResult;
let html: string;

beforeAll(async () => {
  result = await smallConversationSweep([8, 32, 256], POLICIES);
  html = await sweepReportHtml(result);
});

describe('the sweep report', () => {
  it('draws hits against capacity with one line per policy and the optimum, on labelled axes', () => {
    const hits = chartsOf(html).chart('CPU-tier hit tokens by CPU capacity');
    expect(hits).toBeDefined();
    expect(hits?.axisTitles).toEqual(['CPU tier capacity (offloaded blocks)', 'CPU-tier hit tokens']);
    expect(hits?.legend).toEqual([...POLICIES, OPTIMUM_SERIES]);
    expect(hits?.lines).toBe(POLICIES.length + 1);
    for (const capacity of ['8', '32', '256']) expect(hits?.axisLabels).toContain(capacity);
  });

  it('shows each point\'s share of the optimum as a bar per policy and capacity, in percent', () => {
    const share = chartsOf(html).chart('Share of the Belady optimum');
    expect(share?.legend).toEqual(POLICIES);
    expect(share?.bars).toBe(POLICIES.length * 3);
    expect(share?.axisTitles).toEqual(['CPU tier capacity (offloaded blocks)', 'CPU hits / optimum']);
    expect(share?.axisLabels).toContain('100%');
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
    expect(chartsOf(`<html><body>${svg}</body></html>`).charts[0].legend).toEqual([...POLICIES, OPTIMUM_SERIES]);
  });
});
