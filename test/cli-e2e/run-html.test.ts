import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseHTML } from 'linkedom';
import { describe, expect, it } from 'vitest';
import { kvtier, scratchDir } from './cli.js';

/** The same small chat as the multi-turn run test: part of round two comes from the CPU tier. */
const SMALL_CHAT = ['--requests', '16', '--rounds', '2', '--gpu-blocks', '96', '--cpu-blocks', '1024'];

function charts(html: string) {
  const { document } = parseHTML(html);
  return [...document.querySelectorAll('svg')].map((svg) => ({
    title: svg.querySelector('.role-title-text')?.textContent ?? '',
    axisTitles: [...svg.querySelectorAll('.role-axis-title text')].map((t) => t.textContent),
    legend: [...svg.querySelectorAll('.role-legend-label text')].map((t) => t.textContent),
    lines: svg.querySelectorAll('.mark-line path').length,
  }));
}

describe('kvtier run --html', () => {
  it('draws --compare as TTFT distributions off against on, hit shares and transfer rates over time', { timeout: 90_000 }, async () => {
    const file = join(scratchDir(), 'run.html');
    const result = await kvtier(['run', ...SMALL_CHAT, '--compare', '--html', file]);
    expect(result.code).toBe(0);
    const [ttft, hits, transfers] = charts(readFileSync(file, 'utf8'));
    expect(ttft.title).toBe('Time to first token (CDF)');
    expect(ttft.axisTitles).toEqual(['TTFT (ms)', 'share of requests']);
    expect(ttft.legend).toEqual(['offload off', 'offload on']);
    expect(ttft.lines).toBe(2);
    expect(hits.title).toBe('Prompt tokens served by each tier over time');
    expect(hits.legend.sort()).toEqual(['offload off: GPU prefix', 'offload on: CPU tier', 'offload on: GPU prefix']);
    expect(transfers.title).toBe('Transfer rates over time');
    expect(transfers.axisTitles).toEqual(['time (s)', 'MB/s']);
    expect(transfers.legend.sort()).toEqual(['offload on: CPU->GPU', 'offload on: GPU->CPU']);
  });

  it('refuses an HTML path it cannot write before running anything', async () => {
    const result = await kvtier(['run', ...SMALL_CHAT, '--html', '/no/such/folder/run.html']);
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe('kvtier: --html /no/such/folder/run.html: cannot write there: its folder does not exist');
  });
});
