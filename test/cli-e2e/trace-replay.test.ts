import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TraceAnalysis } from '../../src/analysis/analyze.js';
import type { RunReport } from '../../src/report/report.js';
import {
  CONVERSATION_TRACE,
  expectCleanRun,
  expectCpuTierUsed,
  expectNoCpuTier,
  kvtier,
  runWithReport,
  scratchDir,
  scratchFile,
  type CliResult,
  type ComparisonReport,
} from './cli.js';
import { traceSliceTotals, type TraceSliceTotals } from './trace-slice.js';

/**
 * Slices of the Mooncake conversation trace with lengths divided by 64
 * (8 tokens per trace block). The trace's reuse distances are thousands of
 * blocks, so most reuse lies beyond a few hundred GPU blocks and reaches the
 * CPU tier.
 */
const TOKEN_SCALE = 64;
const POOLS = ['--gpu-blocks', '256', '--cpu-blocks', '8192'];

const haveTrace = existsSync(CONVERSATION_TRACE);

describe.skipIf(!haveTrace)('kvtier run --compare on a trace slice submitted at once', () => {
  const SLICE = ['--trace', CONVERSATION_TRACE, '--max-requests', '600', '--token-scale', String(TOKEN_SCALE)];
  let expected: TraceSliceTotals;
  // Four requests of at most 1,906 tokens (120 blocks) fit 512 blocks, so nothing is preempted and every hit is a reuse.
  const NO_PREEMPTION = ['--gpu-blocks', '512', '--cpu-blocks', '8192', '--max-num-seqs', '4'];
  let run: CliResult & { readonly report: ComparisonReport };

  beforeAll(async () => {
    expected = traceSliceTotals(CONVERSATION_TRACE, { tokenScale: TOKEN_SCALE, maxRequests: 600 });
    run = await runWithReport<ComparisonReport>([...SLICE, '--no-arrivals', ...NO_PREEMPTION, '--compare']);
  });

  it('runs the slice twice, offloading off and then on, both clean', () => {
    const { offloadOff, offloadOn } = run.report;
    for (const report of [offloadOff, offloadOn]) {
      expectCleanRun(report);
      expect(report.requests.total).toBe(expected.requests);
      expect(report.tokens.prompt).toBe(expected.promptTokens);
      expect(report.tokens.output).toBe(expected.outputTokens);
    }
    expectNoCpuTier(offloadOff);
    expectCpuTierUsed(offloadOn);
    expect(offloadOff.preemptions + offloadOn.preemptions).toBe(0);
  });

  it('computes fewer prefill tokens with the CPU tier', () => {
    expect(run.report.offloadOn.tokens.prefillComputed).toBeLessThan(run.report.offloadOff.tokens.prefillComputed);
  });

  it('hits no more prompt tokens than kvtier analyze says an infinite cache could', async () => {
    const json = join(scratchDir(), 'analysis.json');
    const analyze = await kvtier(['analyze', ...SLICE, '--cpu-blocks', '8192', '--json', json]);
    expect(analyze.code).toBe(0);
    const analysis = JSON.parse(readFileSync(json, 'utf8')) as TraceAnalysis;
    const { hits } = run.report.offloadOn;
    expect(analysis.trace.promptTokens).toBe(run.report.offloadOn.tokens.prompt);
    expect(hits.gpuPrefixTokens + hits.cpuTierTokens).toBeLessThanOrEqual(analysis.blocks.infiniteCacheHitTokens);
  });

  it('prints both runs side by side', () => {
    expect(run.stdout).toMatch(/^kvtier run --compare: host backend, tp 2, trace .*conversation_trace\.jsonl: 600 requests, all at once, lengths \/ 64, step clock tiny on h100-sxm x2 \(NVIDIA H100 SXM 80GB, default\)$/m);
    expect(run.stdout).toMatch(/^ +offload off +offload on +change$/m);
    expect(run.stdout).toMatch(/^prefill computed +[\d,]+ +[\d,]+ +-\d+\.\d%$/m);
    expect(run.stdout).toMatch(/^integrity +600\/600 +600\/600$/m);
  });

  it('names the run each progress line belongs to, on stderr', () => {
    const progress = run.stderr.split('\n').filter((line) => /requests \d+\/\d+/.test(line));
    expect(progress.some((line) => line.startsWith('[offload off] ['))).toBe(true);
    expect(progress.some((line) => line.startsWith('[offload on] ['))).toBe(true);
    expect(progress.every((line) => /^\[offload (off|on)\] \[[\d.]+s\] requests/.test(line))).toBe(true);
    expect(run.stdout).not.toMatch(/requests \d+\/\d+ \|/);
  });
});

describe.skipIf(!haveTrace)('kvtier run replaying a time window of a trace at its arrival times, from a config file', () => {
  const WINDOW: [number, number] = [30, 90];
  const SPEEDUP = 60;
  let expected: TraceSliceTotals;
  let run: CliResult & { readonly report: RunReport };

  beforeAll(async () => {
    expected = traceSliceTotals(CONVERSATION_TRACE, { tokenScale: TOKEN_SCALE, window: WINDOW });
    const config = scratchFile(
      'replay.json',
      JSON.stringify({ trace: CONVERSATION_TRACE, timeWindow: `${WINDOW[0]}:${WINDOW[1]}`, speedup: SPEEDUP, tokenScale: TOKEN_SCALE, gpuBlocks: 64 }),
    );
    // The flag overrides the file's GPU pool.
    run = await runWithReport(['--config', config, ...POOLS]);
  });

  it('replays exactly the requests arriving in the window, cleanly', () => {
    expectCleanRun(run.report);
    expect(run.report.requests.total).toBe(expected.requests);
    expect(run.report.tokens.prompt).toBe(expected.promptTokens);
    expect(run.report.tokens.output).toBe(expected.outputTokens);
  });

  it('lasts at least until the last arrival, sped up', () => {
    expect(run.report.wallSeconds * 1000).toBeGreaterThanOrEqual(expected.lastArrivalMs / SPEEDUP);
  });

  it('takes the GPU pool from the flag rather than the file', () => {
    // 64 blocks of 16 tokens would reject the window's longest request before the run.
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/arrivals 60x faster, lengths \/ 64/);
  });
});
