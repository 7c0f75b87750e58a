import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Exposition, scrape } from '../support/exposition.js';
import { expectUsageFailure, kvtier } from './cli.js';
import { LiveCli } from './live-run.js';

/**
 * `kvtier run --metrics-port`: a serving team scrapes the endpoint of a
 * running CLI, as Prometheus does, and graphs what it answers.
 */

/** Twelve two-round conversations: a run of a few seconds with prefix hits and CPU-tier stores. */
const REQUESTS = 24;
const HISTOGRAMS = [
  'kvtier_time_to_first_token_seconds',
  'kvtier_time_per_output_token_seconds',
  'kvtier_e2e_request_latency_seconds',
  'kvtier_request_queue_time_seconds',
  'kvtier_step_duration_seconds',
  'kvtier_rank_step_duration_seconds',
  'kvtier_transfer_job_duration_seconds',
  'kvtier_lookup_duration_seconds',
];

function counterSamples(e: Exposition): Map<string, number> {
  const values = new Map<string, number>();
  for (const name of e.names()) {
    if (e.types.get(name) !== 'COUNTER') continue;
    for (const s of e.series(name)) values.set(`${name}${JSON.stringify(s.labels)}`, s.value);
  }
  return values;
}

/** Every histogram series: cumulative buckets never decrease, +Inf equals _count, and _sum is there. */
function expectConsistentHistograms(e: Exposition): void {
  for (const name of HISTOGRAMS) {
    const series = e.histogram(name);
    expect(series.length, name).toBeGreaterThan(0);
    for (const s of series) {
      const counts = s.buckets.map(([, count]) => count);
      const bounds = s.buckets.map(([le]) => le);
      expect(bounds, `${name} bounds`).toEqual([...bounds].sort((a, b) => a - b));
      for (let i = 1; i < counts.length; i++) expect(counts[i], `${name}${JSON.stringify(s.labels)}`).toBeGreaterThanOrEqual(counts[i - 1]);
      expect(bounds.at(-1)).toBe(Number.POSITIVE_INFINITY);
      expect(counts.at(-1), `${name} +Inf bucket`).toBe(s.count);
      expect(Number.isFinite(s.sum)).toBe(true);
      if (s.count === 0) expect(s.sum).toBe(0);
    }
  }
}

/** Scrapes until `ready` holds; 503 (the engine is still starting) counts as not ready. */
async function scrapeUntil(url: string, ready: (e: Exposition) => boolean): Promise<Exposition> {
  for (;;) {
    const response = await fetch(url);
    if (response.status !== 503) {
      expect(response.status).toBe(200);
      const e = new Exposition(await response.text());
      if (ready(e)) return e;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('kvtier run --metrics-port', () => {
  it('serves /metrics while it runs: counters grow between scrapes, histograms are consistent, gauges are idle at the end', async () => {
    const run = new LiveCli([
      'run', '--backend', 'host', '--requests', String(REQUESTS), '--rounds', '2', '--gpu-blocks', '256', '--cpu-blocks', '4096',
      '--metrics-port', '0', '--metrics-linger-ms', '30000',
    ]);
    try {
      const [, url] = await run.waitFor('stderr', /serving metrics at (http:\/\/127\.0\.0\.1:\d+\/metrics)/);

      // Two scrapes while requests are still being served.
      // Conversations pause between rounds, so a scrape may also find nothing in flight; the first one waits for work.
      const busy = (e: Exposition) =>
        e.value('kvtier_requests_total', { state: 'finished' }) < REQUESTS / 2 &&
        e.value('kvtier_requests_running') + e.value('kvtier_requests_waiting') > 0;
      const first = await scrapeUntil(url, busy);
      const second = await scrapeUntil(url, (e) => e.value('kvtier_steps_total') > first.value('kvtier_steps_total') + 20);
      expect(first.value('kvtier_ranks_alive')).toBe(2);
      expect(first.series('kvtier_rank_up').map((s) => [s.labels.rank, s.value])).toEqual([['0', 1], ['1', 1]]);
      expect(second.value('kvtier_tokens_total', { kind: 'output' })).toBeGreaterThan(first.value('kvtier_tokens_total', { kind: 'output' }));
      const before = counterSamples(first);
      for (const [key, value] of counterSamples(second)) expect(value, key).toBeGreaterThanOrEqual(before.get(key) ?? 0);
      expectConsistentHistograms(first);
      expectConsistentHistograms(second);

      // The report is out; the endpoint stays up for a last scrape.
      await run.waitFor('stdout', /integrity: \d+\/\d+/);
      await run.waitFor('stderr', /run ended; serving metrics/);
      const last = await scrape(url);
      expectConsistentHistograms(last);
      expect(last.value('kvtier_requests_total', { state: 'finished' })).toBe(REQUESTS);
      expect(last.histogram('kvtier_time_to_first_token_seconds')[0].count).toBe(REQUESTS);
      expect(last.histogram('kvtier_e2e_request_latency_seconds')[0].count).toBe(REQUESTS);
      for (const idle of [
        'kvtier_requests_running',
        'kvtier_requests_waiting',
        'kvtier_requests_waiting_for_load',
        'kvtier_gpu_blocks_used',
        'kvtier_cpu_blocks_being_stored',
        'kvtier_cpu_blocks_pinned',
      ]) {
        expect(last.value(idle), idle).toBe(0);
      }
      expect(last.value('kvtier_gpu_blocks_free')).toBe(last.value('kvtier_gpu_blocks_capacity'));
      expect(last.series('kvtier_transfer_jobs_in_flight').map((s) => s.value)).toEqual([0, 0]);
      expect(last.value('kvtier_offload_jobs_total', { direction: 'gpu_to_cpu' })).toBeGreaterThan(0);
      expect(last.value('kvtier_cpu_blocks_ready')).toBeGreaterThan(0);
      // The run shut its ranks down.
      expect(last.value('kvtier_ranks_alive')).toBe(0);

      expect(await run.stop('SIGTERM')).toBe(0);
    } finally {
      await run.stop('SIGKILL');
    }
  });

  describe('checks the endpoint before the run starts', () => {
    let taken: Server;
    let port: number;

    beforeAll(async () => {
      taken = createServer();
      await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
      port = (taken.address() as AddressInfo).port;
    });
    afterAll(async () => {
      await new Promise((r) => taken.close(r));
    });

    it('a port in use is exit 2 naming --metrics-port', async () => {
      const line = expectUsageFailure(await kvtier(['run', '--backend', 'host', '--metrics-port', String(port)]));
      expect(line).toBe(`kvtier: --metrics-port ${port}: 127.0.0.1:${port} is already in use`);
    });

    it.each(['http', '65536', '80.5'])('--metrics-port %s is not a port: exit 2 naming the flag', async (value) => {
      const line = expectUsageFailure(await kvtier(['run', '--metrics-port', value]));
      expect(line).toBe(`kvtier: --metrics-port: invalid value "${value}": expected a port number from 0 to 65535`);
    });

    it('--metrics-host without --metrics-port is exit 2 naming it', async () => {
      const line = expectUsageFailure(await kvtier(['run', '--metrics-host', '0.0.0.0']));
      expect(line).toMatch(/^kvtier: --metrics-host applies to the metrics endpoint only/);
    });
  });
});
