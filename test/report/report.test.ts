import { describe, expect, it } from 'vitest';
import { percentile, summarizePercentiles } from '../../src/report/percentiles.js';
import { buildRunReport, type RunReport } from '../../src/report/report.js';
import { formatComparison, formatRunReport } from '../../src/report/report-format.js';
import type { EngineMetrics, FinishedRequest, TransferCounters } from '../../src/runtime/engine-types.js';
import { finishedRequest } from '../cli/finished-requests.js';
import { runReportHtml } from '../../src/report/html/run-report.js';
import { runConfiguration } from '../../src/report/run-configuration.js';
import { resolveEngineConfig } from '../../src/runtime/engine-config.js';
import { chooseGpuProfile } from '../../src/runtime/gpu-profile-choice.js';

function transfer(overrides: Partial<TransferCounters> = {}): TransferCounters {
  return { jobs: 0, failedJobs: 0, bytes: 0, busyMs: 0, copyJobs: 0, ...overrides };
}

function metrics(overrides: Partial<EngineMetrics> = {}): EngineMetrics {
  return {
    steps: 100,
    preemptions: 2,
    requests: { added: 4, finished: 2, aborted: 1, failed: 1 },
    tokens: { prompt: 1000, output: 40, prefillComputed: 400, recomputed: 0, promptReached: 1000 },
    hits: { gpuPrefixTokens: 350, cpuTierTokens: 250 },
    rereads: { gpuPrefixTokens: 0, cpuTierTokens: 0 },
    transfers: { gpuToCpu: transfer({ jobs: 10, bytes: 4e9, busyMs: 2000 }), cpuToGpu: transfer({ jobs: 5, bytes: 1e9, busyMs: 250 }) },
    loadFailures: { blocks: 3, requestsRecovered: 1 },
    storeFailures: 0,
    rankRestarts: 1,
    leaks: { gpuBlocks: 0, cpuBlocks: 0 },
    stepClock: { description: 'tiny on h100-sxm (NVIDIA H100 SXM 80GB, default)', modelledComputeMs: 0, forwardMs: 0 },
    ...overrides,
  };
}

/** A request that arrived at `arrival`, got its first token at `first` and finished at `finish` with `outputs` tokens. */
function timed(id: string, arrival: number, first: number, finish: number, outputs: number, reason: FinishedRequest['finishReason'] = 'length'): FinishedRequest {
  return { ...finishedRequest({ id }), arrivalMs: arrival, firstTokenMs: first, finishMs: finish, outputTokens: Array.from({ length: outputs }, () => 1), finishReason: reason };
}

function sampleReport(overrides: Partial<Parameters<typeof buildRunReport>[0]> = {}): RunReport {
  return buildRunReport({
    finished: [
      timed('a', 0, 10, 110, 11),
      timed('b', 5, 45, 65, 3),
      timed('c', 0, 100, 100, 1, 'stopped'),
      { ...timed('d', 0, 1, 2, 2, 'error'), errorMessage: 'rank 1 failed: exited with code 1' },
      timed('e', 0, 1, 2, 2, 'aborted'),
    ],
    metrics: metrics({ requests: { added: 5, finished: 3, aborted: 1, failed: 1 } }),
    integrity: { checked: 3, mismatches: 0, examples: [] },
    wallSeconds: 4,
    backend: 'host',
    tp: 2,
    offload: true,
    workload: 'multiturn: 2 conversations',
    ...overrides,
  });
}

describe('percentiles', () => {
  it('interpolates between the nearest ranks', () => {
    expect(percentile([1, 2, 3, 4], 50)).toBe(2.5);
    expect(percentile([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 90)).toBe(91);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNull();
  });

  it('sorts before summarizing', () => {
    expect(summarizePercentiles([30, 10, 20])).toEqual({ p50: 20, p90: 28, p99: 29.8 });
  });
});

describe('the run report', () => {
  it('has exactly the documented keys', () => {
    const report = sampleReport();
    expect(Object.keys(report.requests).sort()).toEqual(['aborted', 'failed', 'finished', 'total']);
    expect(Object.keys(report.tokens).sort()).toEqual(['output', 'prefillComputed', 'prompt', 'promptReached', 'recomputed']);
    expect(Object.keys(report.hits).sort()).toEqual(['cpuTierTokens', 'gpuPrefixTokens']);
    expect(Object.keys(report.rereads).sort()).toEqual(['cpuTierTokens', 'gpuPrefixTokens']);
    for (const direction of [report.transfers.gpuToCpu, report.transfers.cpuToGpu]) {
      expect(direction).toEqual(expect.objectContaining({ jobs: expect.any(Number), bytes: expect.any(Number), gbps: expect.any(Number) }));
    }
    expect(Object.keys(report.loadFailures).sort()).toEqual(['blocks', 'requestsRecovered']);
    expect(report.integrity).toEqual(expect.objectContaining({ checked: 3, mismatches: 0 }));
    expect(Object.keys(report.leaks).sort()).toEqual(['cpuBlocks', 'gpuBlocks']);
    expect(Object.keys(report.latency.ttftMs).sort()).toEqual(['p50', 'p90', 'p99']);
    expect(Object.keys(report.latency.tpotMs).sort()).toEqual(['p50', 'p90', 'p99']);
    expect(report).toEqual(expect.objectContaining({ preemptions: 2, rankRestarts: 1, wallSeconds: 4, backend: 'host', tp: 2 }));
  });

  it('counts requests by how they finished', () => {
    expect(sampleReport().requests).toEqual({ total: 5, finished: 3, failed: 1, aborted: 1 });
  });

  it('takes TTFT from arrival to first token over completed requests', () => {
    // a: 10, b: 40, c: 100.
    expect(sampleReport().latency.ttftMs).toEqual({ p50: 40, p90: 88, p99: 98.8 });
  });

  it('takes TPOT over the outputs after the first, for requests with two or more', () => {
    // a: 100 ms / 10 = 10; b: 20 ms / 2 = 10; c has one output.
    expect(sampleReport().latency.tpotMs).toEqual({ p50: 10, p90: 10, p99: 10 });
  });

  it('gives the link rate over busy time and the average over wall time', () => {
    const { gpuToCpu, cpuToGpu } = sampleReport().transfers;
    expect(gpuToCpu).toMatchObject({ jobs: 10, bytes: 4e9, gbps: 2, avgGbps: 1 });
    expect(cpuToGpu).toMatchObject({ jobs: 5, bytes: 1e9, gbps: 4, avgGbps: 0.25 });
  });

  it('has no rate for a direction without transfers', () => {
    const report = sampleReport({ metrics: metrics({ transfers: { gpuToCpu: transfer(), cpuToGpu: transfer() } }) });
    expect(report.transfers.cpuToGpu).toMatchObject({ jobs: 0, gbps: null, avgGbps: null });
  });

  it('keeps the error messages of failed requests', () => {
    expect(sampleReport().errors).toEqual(['rank 1 failed: exited with code 1']);
  });

  it('has no latency figures when nothing completed', () => {
    expect(sampleReport({ finished: [] }).latency.ttftMs).toEqual({ p50: null, p90: null, p99: null });
  });

  it('round-trips through JSON', () => {
    const report = sampleReport();
    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
  });
});

describe('the report as text', () => {
  it('shows every section with units and integrity as passed/checked', () => {
    const text = formatRunReport(sampleReport());
    expect(text).toMatch(/^kvtier run: host backend, tp 2, offload on, multiturn: 2 conversations$/m);
    expect(text).toMatch(/ requests: 5 total {3}3 finished {3}1 failed {3}1 aborted$/m);
    expect(text).toMatch(/ tokens: prompt 1,000 {3}output 40 {3}prefill computed 400 \(0 recomputed\)$/m);
    expect(text).toMatch(/ hits: GPU prefix 350 tok \(35\.0%\) {3}CPU tier 250 tok \(25\.0%\)$/m);
    expect(text).toMatch(/ rereads: GPU prefix 0 tok {3}CPU tier 0 tok {3}\(served again after a preemption or a rank loss; not hits\)$/m);
    expect(text).toMatch(/GPU->CPU +10 jobs +3\.73 GiB +link 2\.00 GB\/s +\(avg over wall 1\.00 GB\/s\)/);
    expect(text).toMatch(/CPU->GPU +5 jobs +953\.67 MiB +link 4\.00 GB\/s +\(avg over wall 250\.0 MB\/s\)/);
    expect(text).toMatch(/ TTFT: p50 +40\.0 ms +p90 +88\.0 ms +p99 +98\.8 ms$/m);
    expect(text).toMatch(/ integrity: 3\/3$/m);
    expect(text).toMatch(/ error: rank 1 failed: exited with code 1$/m);
  });

  it('gives hit shares of the prompt tokens reached, and names the prompt tokens never reached and what was read or computed again', () => {
    const report = sampleReport({
      metrics: metrics({
        // 200 prompt tokens belong to requests that failed first; 50 tokens were computed again, 30 read again.
        tokens: { prompt: 1000, output: 40, prefillComputed: 250, recomputed: 50, promptReached: 800 },
        hits: { gpuPrefixTokens: 400, cpuTierTokens: 200 },
        rereads: { gpuPrefixTokens: 10, cpuTierTokens: 20 },
      }),
    });
    const text = formatRunReport(report);
    expect(text).toMatch(/ tokens: prompt 1,000 \(200 never reached\) {3}output 40 {3}prefill computed 250 \(50 recomputed\)$/m);
    expect(text).toMatch(/ hits: GPU prefix 400 tok \(50\.0%\) {3}CPU tier 200 tok \(25\.0%\)$/m);
    expect(text).toMatch(/ rereads: GPU prefix 10 tok {3}CPU tier 20 tok /m);
  });

  it('aligns the values in one column', () => {
    const lines = formatRunReport(sampleReport()).split('\n').slice(1, 8);
    const valueColumns = lines.map((line) => line.indexOf(': ') >= 0 ? line.indexOf(': ') : line.search(/\S/) - 2);
    expect(new Set(valueColumns).size).toBe(1);
  });

  it('flags mismatches with the request and index', () => {
    const text = formatRunReport(sampleReport({ integrity: { checked: 3, mismatches: 1, examples: [{ id: 'b', index: 4, expected: 1, actual: 2 }] } }));
    expect(text).toMatch(/ integrity: 2\/3 {3}1 MISMATCHED$/m);
    expect(text).toMatch(/mismatch: request b differs first at output 4/);
  });
});

describe('the --compare table', () => {
  it('puts offloading off and on side by side with the change', () => {
    const off = sampleReport({
      offload: false,
      metrics: metrics({ tokens: { prompt: 1000, output: 40, prefillComputed: 800, recomputed: 0, promptReached: 1000 }, hits: { gpuPrefixTokens: 200, cpuTierTokens: 0 } }),
      finished: [timed('a', 0, 20, 120, 11), timed('b', 0, 80, 100, 3), timed('c', 0, 200, 200, 1)],
      wallSeconds: 5,
    });
    const on = sampleReport();
    const text = formatComparison(off, on);
    expect(text).toMatch(/offload off +offload on +change/);
    expect(text).toMatch(/^TTFT p50 +80\.0 ms +40\.0 ms +-50\.0%$/m);
    expect(text).toMatch(/^prefill computed +800 +400 +-50\.0%$/m);
    expect(text).toMatch(/^output tok\/s +8 +10 +\+25\.0%$/m);
    expect(text).toMatch(/^CPU tier hits +0 +250 +-$/m);
    expect(text).toMatch(/^integrity +3\/3 +3\/3$/m);
  });
});

describe('the configuration a report records', () => {
  /** What an engine with these settings resolves to, on the host backend. */
  function configurationOf(input: Parameters<typeof resolveEngineConfig>[0]) {
    const config = resolveEngineConfig({ backend: 'host', model: 'tiny', ...input });
    return runConfiguration(config, chooseGpuProfile(config.gpu, 'host'), 'tiny on l40s (NVIDIA L40S, given)');
  }

  const withTier = configurationOf({ tp: 2, gpuBlocks: 96, cpuBlocks: 64, eviction: 'arc', storePolicy: 'on-evict', offloadFactor: 2, gpu: 'l40s' });
  const withoutTier = configurationOf({ tp: 2, gpuBlocks: 96, offload: false, gpu: 'l40s' });

  it('holds every resolved setting: model, pools, tiers, policies, GPU profile and step clock', () => {
    expect(withTier).toMatchObject({
      model: 'tiny',
      backend: 'host',
      tp: 2,
      gpuBlocks: 96,
      cpuTier: { cpuBlocks: 64, cpuBytes: null, offloadFactor: 2, eviction: 'arc', storePolicy: 'on-evict' },
      gpuProfile: { name: 'l40s', source: 'given', deviceName: null },
      stepClock: 'tiny on l40s (NVIDIA L40S, given)',
    });
    // Defaults appear resolved, not as gaps.
    expect(withTier.scheduler.maxModelLen).toBeGreaterThan(0);
    expect(withTier.scheduler.maxNumSeqs).toBeGreaterThan(0);
    expect(withoutTier.cpuTier).toBeNull();
  });

  it('heads the text report and survives JSON', () => {
    const report = sampleReport({ configuration: withTier });
    const text = formatRunReport(report);
    expect(text).toMatch(/ model: tiny, host backend, tp 2, /m);
    expect(text).toMatch(/ GPU pool: 96 blocks of 16 tokens per rank/m);
    expect(text).toMatch(/ CPU tier: 64 blocks, offload factor 2, eviction arc, store policy on-evict$/m);
    expect(text).toMatch(/ GPU profile: l40s \(given\)$/m);
    expect(JSON.parse(JSON.stringify(report)).configuration).toEqual(withTier);
  });

  it('heads the --compare table with the configuration', () => {
    const text = formatComparison(sampleReport({ offload: false, configuration: withoutTier }), sampleReport({ configuration: withTier }));
    expect(text).toMatch(/ CPU tier: 64 blocks, offload factor 2, eviction arc/m);
    expect(text).toMatch(/^ *GPU profile: l40s/m);
    expect(text).toMatch(/^ *failures: policy recompute, rank restart off$/m);
  });

  it('is a table of the HTML report, one column per run', async () => {
    const html = await runReportHtml([
      { label: 'offload off', report: sampleReport({ offload: false, configuration: withoutTier }), ttftMs: [10, 20], timeline: [] },
      { label: 'offload on', report: sampleReport({ configuration: withTier }), ttftMs: [10, 20], timeline: [] },
    ]);
    expect(html).toContain('<h2>Configuration</h2>');
    expect(html).toContain('<tr><th>setting</th><th>offload off</th><th>offload on</th></tr>');
    expect(html).toMatch(/<tr><td>CPU tier<\/td><td>off<\/td><td>64 blocks, offload factor 2, eviction arc, store policy on-evict<\/td><\/tr>/);
    expect(html).toMatch(/<tr><td>step clock<\/td><td>tiny on l40s/);
  });
});
