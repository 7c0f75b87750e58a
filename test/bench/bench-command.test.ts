import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { benchCommand } from '../../src/cli/bench.js';
import { UsageError } from '../../src/cli/usage-error.js';
import { namedFlagInput } from '../../src/cli/config-input.js';

let dir = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kvtier-bench-command-'));
  // The command prints its table and progress; keep the test output readable.
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
});

afterAll(async () => {
  vi.restoreAllMocks();
  await rm(dir, { recursive: true, force: true });
});

describe('kvtier bench', () => {
  it('runs the gpu check on the host at small sizes: goals as Markdown, the whole report as JSON, figures marked as the host\'s', async () => {
    const json = join(dir, 'gpu.json');
    const markdown = join(dir, 'gpu.md');
    const code = await benchCommand('gpu', namedFlagInput({ backend: 'host', json, markdown }));
    expect(code).toBe(0);
    const results = JSON.parse(await readFile(json, 'utf8'));
    expect(results).toMatchObject({ bench: 'gpu', backend: 'host', report: { hostFigures: true, quick: true } });
    expect(results.results).toEqual(results.report.goals);
    expect(results.report.transfer.length).toBeGreaterThan(0);
    const text = await readFile(markdown, 'utf8');
    expect(text).toContain("these figures are the host's");
    expect(text).toContain('(unmeasured)');
  });

  it('runs the overlap bench and writes its results as JSON and Markdown, with what a host figure means', async () => {
    const json = join(dir, 'overlap.json');
    const markdown = join(dir, 'overlap.md');
    const code = await benchCommand('overlap', namedFlagInput({
      backend: 'host',
      models: 'tiny',
      layouts: 'per-layer',
      batch: '2',
      contextTokens: '16',
      steps: '1',
      rounds: '1',
      jobBytes: '64KiB',
      copyMethod: 'kernel',
      transfers: 'stores,loads',
      json,
      markdown,
    }));
    expect(code).toBe(0);
    const results = JSON.parse(await readFile(json, 'utf8'));
    expect(results).toMatchObject({ bench: 'overlap', backend: 'host', machine: { gpu: null } });
    expect(results.results).toHaveLength(2);
    expect(results.results[0]).toMatchObject({ model: 'tiny', layout: 'per-layer', batch: 2, contextTokens: 16 });
    expect(results.results.map((r: { copyMethod: string; transfers: string }) => `${r.copyMethod} ${r.transfers}`)).toEqual([
      'kernel stores',
      'kernel loads',
    ]);
    const text = await readFile(markdown, 'utf8');
    expect(text).toContain('# kvtier bench overlap (host)');
    expect(text).toContain('can only be checked with --backend cuda');
  });

  it('runs the transfer bench over a list of tensor-parallel shards and copy methods', async () => {
    const json = join(dir, 'transfer.json');
    const code = await benchCommand('transfer', namedFlagInput({
      backend: 'host',
      models: 'small',
      layouts: 'per-layer',
      blockTokens: '16',
      totalBytes: '256KiB',
      repeats: '1',
      tp: '1,2',
      copyMethod: 'dma,kernel',
      json,
    }));
    expect(code).toBe(0);
    const { results } = JSON.parse(await readFile(json, 'utf8'));
    const shards = results.map((r: { tp: number; copyMethod: string }) => `${r.tp} ${r.copyMethod}`);
    expect([...new Set(shards)]).toEqual(['1 dma', '1 kernel', '2 dma', '2 kernel']);
  });

  it('refuses an unknown copy method, naming the flag', async () => {
    await expect(benchCommand('transfer', namedFlagInput({ backend: 'host', copyMethod: 'fast' }))).rejects.toThrow(
      '--copy-method: invalid value "fast": expected a comma-separated list of kernel, dma, auto',
    );
    await expect(benchCommand('overlap', namedFlagInput({ backend: 'host', copyMethod: 'dma,fast' }))).rejects.toThrow(
      /--copy-method: invalid value "dma,fast"/,
    );
  });

  it('asks for a trace before an end-to-end run', async () => {
    await expect(benchCommand('e2e', namedFlagInput({ backend: 'host' }))).rejects.toThrow('--trace FILE is required');
  });

  it('refuses a speedup without arrivals, naming the flag', async () => {
    await expect(benchCommand('e2e', namedFlagInput({ backend: 'host', trace: 'x.jsonl', arrivals: 'false', speedup: '2' }))).rejects.toThrow(
      /--speedup and --arrivals false do not go together/,
    );
  });

  it('lists the kinds it knows for an unknown one', async () => {
    const failure = benchCommand('latency', namedFlagInput({}));
    await expect(failure).rejects.toThrow(UsageError);
    await expect(failure).rejects.toThrow('known: transfer, overlap, scheduler, e2e');
  });
});
