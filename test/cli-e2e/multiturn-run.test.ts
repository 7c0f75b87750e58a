import { beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_DEFAULTS } from '../../src/config/engine-schema.js';
import type { RunReport } from '../../src/report/report.js';
import { expectCleanRun, expectCpuTierUsed, expectNoCpuTier, runWithReport, type CliResult } from './cli.js';

/**
 * 8 conversations x 2 rounds sharing a 512-token system prompt. A 96-block
 * GPU pool cannot keep every conversation's blocks through its think time,
 * so part of round two must come from the CPU tier or be recomputed.
 */
const SMALL_CHAT = ['--requests', '16', '--rounds', '2', '--gpu-blocks', '96'];

type Run = CliResult & { readonly report: RunReport };

describe('kvtier run on the built-in multi-turn workload', () => {
  let withTier: Run;
  let withoutTier: Run;

  beforeAll(async () => {
    // Both runs are mostly think time, so they share the machine well.
    [withTier, withoutTier] = await Promise.all([runWithReport([...SMALL_CHAT, '--cpu-blocks', '1024']), runWithReport([...SMALL_CHAT, '--no-offload'])]);
  });

  it('finishes every request with outputs equal to the reference model and no leaked block, with and without the tier', () => {
    for (const run of [withTier, withoutTier]) {
      expectCleanRun(run.report);
      expect(run.report.requests.total).toBe(16);
      expect(run.report).toMatchObject({ backend: 'host', tp: 2 });
    }
  });

  it('serves part of round two from the CPU tier and loads exactly the blocks it hit', () => {
    expectCpuTierUsed(withTier.report);
  });

  it('moves no KV to or from a CPU tier with --no-offload', () => {
    expectNoCpuTier(withoutTier.report);
  });

  it('computes fewer prefill tokens when the CPU tier is on', () => {
    expect(withTier.report.tokens.prefillComputed).toBeLessThan(withoutTier.report.tokens.prefillComputed);
  });

  it('sees the same prompts either way: the workload does not depend on where the KV came from', () => {
    expect(withTier.report.tokens.prompt).toBe(withoutTier.report.tokens.prompt);
    expect(withTier.report.tokens.output).toBe(withoutTier.report.tokens.output);
  });

  it('prints the text report with the integrity and leak lines', () => {
    expect(withTier.stdout).toMatch(/^kvtier run: host backend, tp 2, offload on, multiturn: 8 conversations x up to 2 rounds/m);
    expect(withTier.stdout).toMatch(/^ +integrity: 16\/16$/m);
    expect(withTier.stdout).toMatch(/^ +leaks: 0 GPU blocks, 0 CPU blocks$/m);
    expect(withoutTier.stdout).toMatch(/offload off/);
  });

  it('records the configuration each run resolved to, in the JSON and at the head of the text report', () => {
    expect(withTier.report.configuration).toMatchObject({
      model: 'tiny',
      backend: 'host',
      tp: 2,
      gpuBlocks: 96,
      cpuTier: { cpuBlocks: 1024, eviction: ENGINE_DEFAULTS.eviction, storePolicy: ENGINE_DEFAULTS.storePolicy, offloadFactor: 1 },
      gpuProfile: { name: 'h100-sxm', source: 'default' },
      stepClock: withTier.report.clock.description,
    });
    expect(withoutTier.report.configuration?.cpuTier).toBeNull();
    expect(withTier.stdout).toContain(`CPU tier: 1024 blocks, offload factor 1, eviction ${ENGINE_DEFAULTS.eviction}, store policy ${ENGINE_DEFAULTS.storePolicy}\n`);
    expect(withoutTier.stdout).toMatch(/^ +CPU tier: off$/m);
  });

  it('keeps progress off stdout: stdout is the report alone, stderr holds only progress lines', () => {
    expect(withTier.stdout).toMatch(/^kvtier run: /);
    expect(withTier.stdout).not.toMatch(/^\[[\d.]+s\] requests/m);
    const progress = withTier.stderr.split('\n').filter((line) => line !== '');
    expect(progress.length).toBeGreaterThan(0);
    for (const line of progress) expect(line).toMatch(/^\[[\d.]+s\] requests \d+\/\d+ \|/);
  });
});
