import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SweepResult } from '../../src/bench/sweep.js';
import { conversationLines, traceFile } from '../support/sweep-fixture.js';
import { expectUsageFailure, kvtier, scratchDir } from './cli.js';

const TRACE = traceFile(conversationLines());
const SMALL = ['--trace', TRACE, '--token-scale', '64', '--gpu-blocks', '16', '--block-size', '4'];

describe('kvtier sweep', () => {
  it('prints a row per capacity and policy and writes the same points as JSON and an HTML report', async () => {
    const dir = scratchDir();
    const json = join(dir, 'sweep.json');
    const html = join(dir, 'sweep.html');
    const svg = join(dir, 'sweep.svg');
    const result = await kvtier(['sweep', ...SMALL, '--cpu-blocks', '256,8', '--policies', 'lru,s3fifo/on-evict', '--json', json, '--html', html, '--svg', svg]);
    expect(result.code).toBe(0);
    const rows = result.stdout.split('\n').filter((line) => /^(lru|s3fifo\/on-evict) /.test(line));
    expect(rows.map((row) => row.split(/\s+/).slice(0, 2).join(' '))).toEqual(['lru 8', 's3fifo/on-evict 8', 'lru 256', 's3fifo/on-evict 256']);
    for (const row of rows) expect(row).toMatch(/24\/24  +\d+\.\d\dx$/);
    const sweep = JSON.parse(readFileSync(json, 'utf8')) as SweepResult;
    expect(sweep.cpuBlocks).toEqual([8, 256]);
    expect(sweep.points.map((p) => p.cpuHitTokens)).toEqual(rows.map((row) => Number(row.split(/\s+/)[2].replace(/,/g, ''))));
    // The CPU tier's bound and its share per point, the ceiling and the GPU+CPU optimum, named as such.
    expect(result.stdout).toMatch(/^policy\s+CPU blocks\s+CPU hit tok\s+GPU hit tok\s+prefill tok\s+reread tok\s+recomputed\s+CPU bound\s+of bound\s+GPU\+CPU opt\s+verified\s+pace$/m);
    expect(result.stdout).toContain(`ceiling: an unbounded CPU tier over the same stream hits ${sweep.cpuTierCeilingHitTokens.toLocaleString('en-US')} tokens`);
    expect(sweep.cpuTierBound.map((b) => b.cpuBlocks)).toEqual([8, 256]);
    for (const b of sweep.cpuTierBound) expect(b.hitTokens).toBeLessThanOrEqual(sweep.cpuTierCeilingHitTokens);
    expect(sweep.points.map((p) => p.cpuTierBoundHitTokens)).toEqual(sweep.cpuTierBound.flatMap((b) => [b.hitTokens, b.hitTokens]));
    expect(readFileSync(html, 'utf8')).toMatch(/^<!DOCTYPE html>[\s\S]*<svg[\s\S]*<\/html>\n$/);
    expect(readFileSync(svg, 'utf8')).toMatch(/^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"[\s\S]*<\/svg>\n$/);
    expect(result.stderr).toContain('[4/4]');
  });

  it('runs the full engine per point with --engine and adds TTFT', async () => {
    const result = await kvtier(['sweep', ...SMALL, '--cpu-blocks', '256', '--policies', 'lru', '--engine', '--speedup', '1000']);
    expect(result.code).toBe(0);
    const [header, row] = result.stdout.split('\n').filter((line) => /^(policy|lru) /.test(line));
    expect(header).toMatch(/TTFT p50 ms\s+TTFT p99 ms$/);
    expect(row).toMatch(/^lru\s+256\s.*24\/24\s+\d+\.\d\s+\d+\.\d$/);
    // At least the six returning conversations load their 32-token previous prompt from the tier.
    expect(Number(row.split(/\s+/)[2])).toBeGreaterThanOrEqual(6 * 32);
  });

  it.each([
    [['--cpu-blocks', '1000,lots'], '--cpu-blocks: invalid value "lots": expected a positive integer'],
    [['--cpu-blocks', '1000,,2000'], '--cpu-blocks: invalid value "1000,,2000": expected a comma-separated list with no empty items'],
    [['--cpu-blocks', '8,8'], '--cpu-blocks: the same capacity is listed twice'],
    [['--cpu-bytes', '1MiB,huge'], '--cpu-bytes: invalid value "huge": expected a size such as 64MiB or 2GB'],
    [['--cpu-blocks', '8', '--cpu-bytes', '1MiB'], '--cpu-blocks and --cpu-bytes both size the CPU tier; give one'],
    [['--policies', 'lru,fifo'], /^--policies: policy "fifo": expected lru, arc, lhd, s3fifo, hold, classhold, lru\+queue, s3fifo\+queue, hold\+queue, classhold\+queue, reuse:K/],
    [['--policies', 'lru/sometimes'], /^--policies: storePolicy must be/],
    [['--speedup', '10'], '--speedup only applies with --engine'],
    [['--engine', '--speedup', 'fast'], '--speedup: invalid value "fast": expected a number > 0'],
    [['--step-ms', 'slow'], '--step-ms: invalid value "slow": expected a number > 0'],
    [['--engine', '--step-ms', '250'], '--step-ms applies to the simulated replay, not with --engine (use --speedup)'],
    [['--max-requests', '0'], '--max-requests: invalid value "0": expected a positive integer'],
    [['--block-size', '8192'], '--block-size: invalid value "8192": expected a positive integer up to 4096'],
    [['--cpu-bytes', '100'], /^--cpu-bytes: invalid value "100": holds no offloaded block: one takes \d+ bytes over all ranks/],
    [['--html', '/no/such/folder/report.html'], '--html /no/such/folder/report.html: cannot write there: its folder does not exist'],
  ])('rejects %j with one line naming the flag', async (args, message) => {
    const line = expectUsageFailure(await kvtier(['sweep', ...SMALL, ...args])).replace(/^kvtier: /, '');
    if (typeof message === 'string') expect(line).toBe(message);
    else expect(line).toMatch(message);
  });

  it('names a trace file that does not exist', async () => {
    const line = expectUsageFailure(await kvtier(['sweep', '--trace', '/no/such/trace.jsonl']));
    expect(line).toContain('/no/such/trace.jsonl');
  });
});
