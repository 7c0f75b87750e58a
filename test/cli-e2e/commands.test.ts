import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TraceAnalysis } from '../../src/analysis/analyze.js';
import { CONVERSATION_TRACE, kvtier, scratchDir } from './cli.js';
import { traceSliceTotals } from './trace-slice.js';

describe.concurrent('the kvtier commands besides run', () => {
  it('prints the package version', async () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const result = await kvtier(['--version']);
    expect(result).toMatchObject({ code: 0, stdout: `${manifest.version}\n`, stderr: '' });
  });

  it('documents every run flag in its help and exits 0', async () => {
    const result = await kvtier(['run', '--help']);
    expect(result.code).toBe(0);
    for (const flag of ['--config', '--backend', '--cpu-bytes', '--store-policy', '--no-offload', '--trace', '--token-scale', '--faults', '--compare', '--json']) {
      expect(result.stdout).toContain(flag);
    }
  });

  it.skipIf(!existsSync(CONVERSATION_TRACE))('analyze reports the reuse of a trace slice, its GPU+CPU optimum and the CPU tier bound behind a GPU pool, as text and JSON', async () => {
    const json = join(scratchDir(), 'analysis.json');
    const result = await kvtier(['analyze', '--trace', CONVERSATION_TRACE, '--max-requests', '300', '--token-scale', '64', '--cpu-blocks', '512', '--gpu-blocks', '256', '--json', json]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^ *GPU\+CPU optimum: [\d,]+ tokens at 512 blocks/m);
    expect(result.stdout).toMatch(/^ *CPU tier bound: [\d,]+ tokens at 512 CPU blocks behind 256 GPU blocks/m);
    const analysis = JSON.parse(readFileSync(json, 'utf8')) as TraceAnalysis;
    const slice = traceSliceTotals(CONVERSATION_TRACE, { tokenScale: 64, maxRequests: 300 });
    expect(analysis.trace).toMatchObject({ requests: slice.requests, promptTokens: slice.promptTokens, outputTokens: slice.outputTokens });
    expect(analysis.gpuCpuOptimum.hitTokens).toBeGreaterThan(0);
    expect(analysis.gpuCpuOptimum.hitTokens).toBeLessThanOrEqual(analysis.blocks.infiniteCacheHitTokens);
    expect(analysis.cpuTierBound?.hitTokens).toBeLessThanOrEqual(analysis.cpuTierBound?.ceilingHitTokens ?? 0);
  });

  it('bench scheduler prints its table and writes its results', async () => {
    const json = join(scratchDir(), 'scheduler.json');
    const result = await kvtier(['bench', 'scheduler', '--running', '16', '--steps', '20', '--json', json]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/runningRequests/);
    const written = JSON.parse(readFileSync(json, 'utf8')) as { bench: string; results: { runningRequests: number }[] };
    expect(written.bench).toBe('scheduler');
    expect(written.results.map((r) => r.runningRequests)).toContain(16);
  });
});
