import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PNG } from 'pngjs';
import puppeteer from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import { sweepReportHtml } from '../../src/bench/sweep-report.js';
import { smallConversationSweep } from '../support/sweep-fixture.js';

/**
 * The HTML report opened in a real headless browser (Debian's chromium, no
 * network): it must render without console errors, load nothing from
 * outside, and show the charts (a screenshot with plenty of drawn pixels).
 */

const CHROMIUM = process.env.KVTIER_CHROMIUM ?? '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.log(`skipping the browser test: ${CHROMIUM} is missing (install it: apt-get install -y chromium)`);

/** Share of pixels that are not (near) white. */
function drawnShare(png: Buffer): number {
  const image = PNG.sync.read(png);
  let drawn = 0;
  for (let i = 0; i < image.data.length; i += 4) {
    if (image.data[i] < 240 || image.data[i + 1] < 240 || image.data[i + 2] < 240) drawn++;
  }
  return drawn / (image.width * image.height);
}

describe.skipIf(!haveChromium)('the sweep report in headless chromium', () => {
  it('renders its charts with no console errors and no outside requests', { timeout: 60_000 }, async () => {
    const result = await smallConversationSweep([8, 256], ['lru', 's3fifo']);
    const file = join(mkdtempSync(join(tmpdir(), 'kvtier-report-')), 'sweep.html');
    writeFileSync(file, await sweepReportHtml(result));

    const browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error' || message.type() === 'warn') problems.push(`${message.type()}: ${message.text()}`);
      });
      page.on('pageerror', (error) => problems.push(`page error: ${String(error)}`));
      const outside: string[] = [];
      page.on('request', (request) => {
        if (!request.url().startsWith('file:')) outside.push(request.url());
      });
      await page.setViewport({ width: 1100, height: 1600 });
      await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });

      const charts = await page.$$eval('svg', (svgs) => svgs.map((svg) => svg.getBoundingClientRect().width));
      // Hits against capacity, the share of the CPU tier bound, the reuse-distance histogram.
      expect(charts).toHaveLength(3);
      for (const width of charts) expect(width).toBeGreaterThan(300);
      const screenshot = Buffer.from(await page.screenshot({ type: 'png', fullPage: true }));
      expect(drawnShare(screenshot)).toBeGreaterThan(0.02);
      expect(problems).toEqual([]);
      expect(outside).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
