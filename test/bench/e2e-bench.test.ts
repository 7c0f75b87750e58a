import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runE2eBench, type E2eBenchOptions } from '../../src/bench/e2e.js';

/**
 * A trace built so the CPU tier must serve a hit: request A, then two
 * unrelated requests that push A's blocks out of a small GPU cache, then A
 * again with one more block. With one request running at a time the order is
 * fixed, whatever the machine's speed.
 */
const TRACE_LINES = [
  { timestamp: 0, input_length: 512 * 8, output_length: 4, hash_ids: [1, 2, 3, 4, 5, 6, 7, 8] },
  { timestamp: 10, input_length: 512 * 8, output_length: 4, hash_ids: [11, 12, 13, 14, 15, 16, 17, 18] },
  { timestamp: 20, input_length: 512 * 8, output_length: 4, hash_ids: [21, 22, 23, 24, 25, 26, 27, 28] },
  { timestamp: 30, input_length: 512 * 9, output_length: 4, hash_ids: [1, 2, 3, 4, 5, 6, 7, 8, 9] },
];

let dir = '';
let traceFile = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kvtier-e2e-bench-'));
  traceFile = join(dir, 'trace.jsonl');
  await writeFile(traceFile, TRACE_LINES.map((line) => JSON.stringify(line)).join('\n') + '\n');
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** 8 tokens per trace block and per GPU block: 18 GPU blocks hold two requests, so C evicts part of A. */
function smallRun(overrides: Partial<E2eBenchOptions> = {}): E2eBenchOptions {
  return {
    backend: 'host',
    traceFile,
    maxRequests: 100,
    tokenScale: 64,
    arrivals: false,
    tp: 2,
    blockSize: 8,
    gpuBlocks: 18,
    cpuBlocks: 64,
    maxNumSeqs: 1,
    ...overrides,
  };
}

describe('the end-to-end bench', () => {
  it('runs the slice with offload off, then on, and counts the CPU-tier hit the GPU cache could not serve', async () => {
    const rows = await runE2eBench(smallRun());
    expect(rows.map((r) => r.offload)).toEqual([false, true]);
    const [off, on] = rows;
    for (const row of rows) {
      expect(row.requests).toBe(4);
      expect(row.finished).toBe(4);
      expect(row.promptTokens).toBe((8 + 8 + 8 + 9) * 8);
      expect(row.verified).toBe(4);
      expect(row.mismatches).toBe(0);
      expect(row.ttftP50Ms).not.toBeNull();
      expect(row.outputTokensPerSecond).toBeGreaterThan(0);
      // The GPU+CPU optimum of the same slice: A's 8 blocks come back once.
      expect(row.gpuCpuOptimalHitTokens).toBe(64);
    }
    expect(off.cpuHitTokens).toBe(0);
    // A's blocks still in the GPU cache are hits there; the CPU tier serves the rest of them.
    expect(on.gpuPrefixHitTokens).toBe(off.gpuPrefixHitTokens);
    expect(on.cpuHitTokens).toBeGreaterThan(0);
    expect(on.cpuHitTokens).toBe(64 - on.gpuPrefixHitTokens);
    // The two tiers together catch all of it.
    expect(on.hitShareOfGpuCpuOptimal).toBe(1);
    expect(on.prefillTokensComputed).toBe(off.prefillTokensComputed - on.cpuHitTokens);
  });

  it('feeds requests by their trace arrival times when arrivals are on', async () => {
    const rows = await runE2eBench(smallRun({ arrivals: true, speedup: 1000 }));
    expect(rows.map((r) => [r.finished, r.speedup])).toEqual([
      [4, 1000],
      [4, 1000],
    ]);
  });

  it('names the option it refuses', async () => {
    await expect(runE2eBench(smallRun({ gpuBlocks: 0 }))).rejects.toThrow('invalid engine config: gpuBlocks: invalid value 0: expected a positive integer');
    await expect(runE2eBench(smallRun({ arrivals: false, speedup: 2 }))).rejects.toThrow('speedup and arrivals off');
  });
});
