import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { analyzeLoadedTrace, analyzeTrace } from '../../src/analysis/analyze.js';
import { parseAnalyzeArgs, analyzeCommand } from '../../src/cli/analyze-command.js';
import { simulateBelady } from '../../src/analysis/belady.js';
import { buildOffloadBlockAccesses, type OffloadBlockAccesses } from '../../src/analysis/offload-blocks.js';
import { UsageError } from '../../src/cli/usage-error.js';
import type { Trace, TraceRecord } from '../../src/workload/trace.js';
import { SeededRandom } from '../../src/core/prng.js';
import { CONVERSATION_TRACE, traceLine, writeTraceFile } from '../workload/trace-files.js';

/**
 * Handmade traces use 512-token GPU blocks, so one hash id is one offloaded
 * block, and prompts of 512 * n + 1 tokens: n full blocks plus one token
 * (its own hash id) that is always computed.
 */
const BLOCK = 512;
let nextPartialId = 1_000_000;

/** A request whose full blocks carry `ids` (one per block), arriving at `second`. */
function request(ids: number[], second = 0): string {
  return traceLine(second * 1000, ids.length * BLOCK + 1, 1, [...ids, nextPartialId++]);
}

async function optimum(lines: string[], cpuBlocks: number) {
  const analysis = await analyzeTrace({ trace: writeTraceFile(lines), cpuBlocks, blockSize: BLOCK });
  return analysis;
}

const A = 1, B = 2, C = 3, D = 4;

describe('the Belady optimum on handmade traces', () => {
  it('keeps the blocks needed soonest and skips storing one used later', async () => {
    // Cache of 2: after [A,B], C's next use (request 4) is later than A's and B's (request 3), so C is not kept.
    const analysis = await optimum([request([A, B]), request([C]), request([A, B]), request([C])], 2);
    expect(analysis.gpuCpuOptimum.hitBlocks).toBe(2);
    expect(analysis.gpuCpuOptimum.hitTokens).toBe(2 * BLOCK);
  });

  it('counts only prefix hits: a block behind a miss is no hit', async () => {
    // Cache of 1: A and B are both needed next; keeping B alone would hit nothing, so A stays.
    const analysis = await optimum([request([A, B]), request([A, B])], 1);
    expect(analysis.gpuCpuOptimum.hitBlocks).toBe(1);
  });

  it('treats equal hash ids under different prefixes as different blocks', async () => {
    const analysis = await optimum([request([A, B]), request([C, B])], 10);
    expect(analysis.blocks.unique).toBe(4);
    expect(analysis.gpuCpuOptimum.hitBlocks).toBe(0);
  });

  it('always computes the last prompt token, even when every block hits', async () => {
    const lines = [traceLine(0, 2 * BLOCK, 1, [A, B]), traceLine(1, 2 * BLOCK, 1, [A, B])];
    const analysis = await optimum(lines, 10);
    expect(analysis.gpuCpuOptimum.hitBlocks).toBe(2);
    expect(analysis.gpuCpuOptimum.hitTokens).toBe(2 * BLOCK - 1);
  });

  it('hits nothing without capacity and everything reusable with enough of it', async () => {
    const lines = [request([A, B]), request([A, C]), request([A, B, D]), request([A, C])];
    expect((await optimum(lines, 0)).gpuCpuOptimum.hitTokens).toBe(0);
    const roomy = await optimum(lines, 100);
    expect(roomy.gpuCpuOptimum.hitBlocks).toBe(1 + 2 + 2);
    expect(roomy.gpuCpuOptimum.hitTokens).toBe(roomy.blocks.infiniteCacheHitTokens);
    expect(roomy.gpuCpuOptimum.percentOfInfinite).toBe(100);
  });

  it('splits a trace block into several offloaded blocks when blocks are smaller', async () => {
    // 256-token blocks: a 600-token prompt has two full blocks, both inside hash id 7.
    const lines = [traceLine(0, 600, 1, [7, 8]), traceLine(1, 800, 1, [7, 9])];
    const analysis = await analyzeTrace({ trace: writeTraceFile(lines), cpuBlocks: 10, blockSize: 256 });
    expect(analysis.blocks.accesses).toBe(2 + 3);
    expect(analysis.blocks.unique).toBe(3);
    expect(analysis.gpuCpuOptimum.hitTokens).toBe(512);
  });

  it('joins several scaled trace blocks into one offloaded block when blocks are larger', async () => {
    // Token scale 64: 8 tokens per hash id; a 16-token block spans two ids and needs both to match.
    const lines = [traceLine(0, 64 * 40, 1, [1, 2, 3, 4, 5]), traceLine(1, 64 * 40, 1, [1, 2, 3, 6, 7])];
    const analysis = await analyzeTrace({ trace: writeTraceFile(lines), cpuBlocks: 10, blockSize: 16, tokenScale: 64 });
    expect(analysis.blocks.accesses).toBe(2 + 2);
    expect(analysis.gpuCpuOptimum.hitBlocks).toBe(1);
    expect(analysis.gpuCpuOptimum.hitTokens).toBe(16);
  });
});

describe('the reuse profile', () => {
  it('measures reuse distance as distinct blocks between uses', async () => {
    // Accesses A, A, B, A: distances 0 and 1.
    const analysis = await optimum([request([A]), request([A]), request([B]), request([A])], 1);
    expect(analysis.reuseDistance.reuses).toBe(2);
    expect(analysis.reuseDistance.p50).toBe(0);
    expect(analysis.reuseDistance.max).toBe(1);
    expect(analysis.reuseDistance.withinCapacity).toBe(1);
    expect(analysis.reuseDistance.histogram).toEqual([
      { from: 0, to: 1, count: 1 },
      { from: 1, to: 2, count: 1 },
    ]);
    expect(analysis.blocks.reusePercent).toBe(50);
  });

  it('counts requests and tokens of the slice', async () => {
    const lines = [request([A], 0), request([A, B], 10), request([A, C], 30)];
    const analysis = await analyzeTrace({ trace: writeTraceFile(lines), cpuBlocks: 4, blockSize: BLOCK, timeWindow: [5, 100] });
    expect(analysis.trace).toMatchObject({ requests: 2, promptTokens: 2 * (2 * BLOCK + 1), outputTokens: 2, spanSeconds: 20 });
  });
});

/** The same policy written the slow, obvious way: scan ahead for each resident block's next use. */
function directBelady(accesses: OffloadBlockAccesses, capacity: number): number {
  const { blocks, starts, depth } = accesses;
  const requests = starts.length - 1;
  const blocksOf = (i: number) => Array.from(blocks.subarray(starts[i], starts[i + 1]));
  const nextUse = (block: number, after: number) => {
    for (let j = after + 1; j < requests; j++) if (blocksOf(j).includes(block)) return j;
    return Infinity;
  };
  const cache = new Set<number>();
  let hitBlocks = 0;
  for (let i = 0; i < requests; i++) {
    const own = blocksOf(i);
    let k = 0;
    while (k < own.length && cache.has(own[k])) k++;
    hitBlocks += k;
    for (const block of own) cache.add(block);
    while (cache.size > capacity) {
      const upcoming = new Map([...cache].map((block) => [block, nextUse(block, i)]));
      const victim = [...cache].sort((x, y) => upcoming.get(y)! - upcoming.get(x)! || depth[y] - depth[x])[0];
      cache.delete(victim);
    }
  }
  return hitBlocks;
}

/** A random trace of short prompts over a small tree of shared prefixes. */
function randomTrace(seed: number, requests: number): Trace {
  const rng = new SeededRandom(seed);
  const records: TraceRecord[] = [];
  for (let i = 0; i < requests; i++) {
    const length = rng.nextInt(1, 6);
    const hashIds: number[] = [];
    for (let d = 0; d < length; d++) hashIds.push(rng.nextInt(0, 2));
    records.push({ line: i + 1, timestampMs: i, inputLength: (length - 1) * 16 + rng.nextInt(1, 16), outputLength: 1, hashIds });
  }
  return { file: 'random', records, blockTokens: 16, tokenScale: 32, originMs: 0 };
}

describe('the fast Belady simulation', () => {
  it.each([1, 2, 3, 4, 5, 6])('agrees with a direct simulation on random trace %i', (seed) => {
    const trace = randomTrace(seed, 60);
    const accesses = buildOffloadBlockAccesses(trace.records, trace.blockTokens, 8);
    for (const capacity of [1, 3, 7, 12, 20]) {
      expect(simulateBelady(accesses, capacity).hitBlocks).toBe(directBelady(accesses, capacity));
    }
  });

  it('never hits more than an infinite cache', () => {
    const trace = randomTrace(9, 200);
    const analysis = analyzeLoadedTrace(trace, { cpuBlocks: 6, blockSize: 8 });
    expect(analysis.gpuCpuOptimum.hitTokens).toBeLessThanOrEqual(analysis.blocks.infiniteCacheHitTokens);
  });
});

describe.skipIf(!existsSync(CONVERSATION_TRACE))('analyzing the first 500 conversation requests', () => {
  it('gives a consistent profile and optimum', async () => {
    const analysis = await analyzeTrace({ trace: CONVERSATION_TRACE, maxRequests: 500, cpuBlocks: 4096, tokenScale: 4 });
    const { blocks, reuseDistance, gpuCpuOptimum: optimal, trace } = analysis;
    expect(trace.requests).toBe(500);
    expect(blocks.unique).toBeLessThan(blocks.accesses);
    expect(blocks.reusedAccesses).toBe(blocks.accesses - blocks.unique);
    expect(reuseDistance.reuses).toBe(blocks.reusedAccesses);
    expect(reuseDistance.histogram.reduce((sum, b) => sum + b.count, 0)).toBe(reuseDistance.reuses);
    expect(reuseDistance.p10!).toBeLessThanOrEqual(reuseDistance.p50!);
    expect(reuseDistance.p50!).toBeLessThanOrEqual(reuseDistance.p99!);
    expect(optimal.hitTokens).toBeGreaterThan(0);
    expect(optimal.hitTokens).toBeLessThanOrEqual(blocks.infiniteCacheHitTokens);
    expect(blocks.infiniteCacheHitTokens).toBeLessThan(trace.promptTokens);
  });

  it('matches the infinite cache once the CPU tier holds every block', async () => {
    const analysis = await analyzeTrace({ trace: CONVERSATION_TRACE, maxRequests: 500, cpuBlocks: 10_000_000, tokenScale: 4 });
    expect(analysis.gpuCpuOptimum.hitTokens).toBe(analysis.blocks.infiniteCacheHitTokens);
  });
});

describe('kvtier analyze arguments', () => {
  it('reads the trace, geometry and slice', () => {
    expect(
      parseAnalyzeArgs(['--trace', 't.jsonl', '--cpu-blocks', '100', '--block-size', '32', '--offload-factor', '2', '--token-scale', '4', '--max-requests', '50', '--time-window', '0:60', '--json', 'a.json']),
    ).toEqual({ trace: 't.jsonl', cpuBlocks: 100, blockSize: 32, offloadFactor: 2, tokenScale: 4, maxRequests: 50, timeWindow: [0, 60], gpuBlocks: null, json: 'a.json' });
    expect(parseAnalyzeArgs(['--trace', 't.jsonl', '--gpu-blocks', '64']).gpuBlocks).toBe(64);
  });

  it('converts a CPU tier size in bytes with the model KV size', () => {
    // tiny: 2 layers x 2 (K, V) x 4 heads x 8 dims x 2 bytes = 256 bytes per token; 16-token blocks are 4 KiB.
    expect(parseAnalyzeArgs(['--trace', 't', '--cpu-bytes', '1MiB']).cpuBlocks).toBe(256);
    expect(parseAnalyzeArgs(['--trace', 't', '--cpu-bytes', '1MiB', '--model', 'small']).cpuBlocks).toBe(2 ** 20 / (4 * 2 * 4 * 32 * 2 * 16));
  });

  it.each([
    [[], /required option '--trace <file>' not specified/],
    [['--trace', 't', '--cpu-blocks', 'many'], /^--cpu-blocks: invalid value "many": expected a positive integer$/],
    [['--trace', 't', '--cpu-blocks', '5', '--cpu-bytes', '1GiB'], /^--cpu-blocks and --cpu-bytes both size the CPU tier; give one$/],
    [['--trace', 't', '--model', 'small'], /^--model only converts --cpu-bytes/],
    [['--trace', 't', '--token-scale', '5'], /^--token-scale: invalid value "5"/],
    [['--trace', 't', '--block-size', '8192'], /^--block-size: invalid value "8192": expected a positive integer up to 4096$/],
    [['--trace', 't', '--gpu-blocks', '0'], /^--gpu-blocks: invalid value "0"/],
    [['--trace', 't', '--cpu-bytes', '100'], /^--cpu-bytes: invalid value "100": holds no offloaded block: one takes 4096 bytes over all ranks$/],
  ])('rejects %j naming the flag', (argv, message) => {
    expect(() => parseAnalyzeArgs(argv)).toThrow(UsageError);
    expect(() => parseAnalyzeArgs(argv)).toThrow(message);
  });

  it('prints the analysis and writes the same numbers as JSON', async () => {
    const trace = writeTraceFile([request([A, B]), request([A, B])]);
    const json = `${trace}.analysis.json`;
    let printed = '';
    const out = { write: (text: string) => ((printed += text), true) } as unknown as NodeJS.WritableStream;
    const code = await analyzeCommand({ ...parseAnalyzeArgs(['--trace', trace, '--cpu-blocks', '8', '--block-size', '512']), json }, out);
    expect(code).toBe(0);
    const written = JSON.parse(readFileSync(json, 'utf8'));
    expect(written.gpuCpuOptimum).toMatchObject({ method: 'belady-min-prefix-hits-no-gpu-tier', cpuBlocks: 8, hitBlocks: 2, hitTokens: 1024 });
    expect(written.cpuTierBound).toBeNull();
    expect(printed).toMatch(/GPU\+CPU optimum: 1,024 tokens at 8 blocks/);
    expect(printed).toMatch(/does not\s+bound a CPU tier's hits\. For the CPU tier's bound behind a GPU pool, give --gpu-blocks \(or see kvtier sweep\)/);
    expect(printed).toMatch(/The GPU\+CPU optimum assumes:/);
  });

  it('with a GPU pool, reports the CPU tier\'s bound behind it and the unbounded tier\'s ceiling', async () => {
    // The GPU pool holds one request: the one-off between the two turns of [A, B] evicts them from it.
    const trace = writeTraceFile([request([A, B], 0), request([C, D], 10), request([A, B], 20)]);
    const analyze = async (cpuBlocks: number) => {
      const json = `${trace}.${cpuBlocks}.analysis.json`;
      let printed = '';
      const out = { write: (text: string) => ((printed += text), true) } as unknown as NodeJS.WritableStream;
      const argv = ['--trace', trace, '--cpu-blocks', String(cpuBlocks), '--block-size', String(BLOCK), '--gpu-blocks', '3'];
      expect(await analyzeCommand({ ...parseAnalyzeArgs(argv), json }, out)).toBe(0);
      return { printed, written: JSON.parse(readFileSync(json, 'utf8')) };
    };
    // Room for both blocks: the second turn loads them all.
    const roomy = await analyze(8);
    expect(roomy.written.cpuTierBound).toMatchObject({ method: 'belady-min-bypass-behind-gpu-tier', gpuBlocks: 3, cpuBlocks: 8, hitTokens: 2 * BLOCK, ceilingHitTokens: 2 * BLOCK });
    expect(roomy.printed).toMatch(/CPU tier bound: 1,024 tokens at 8 CPU blocks behind 3 GPU blocks: 100\.0% of the ceiling/);
    expect(roomy.printed).toMatch(/CPU tier ceiling: 1,024 tokens/);
    expect(roomy.written.cpuTierBound.provenBoundTokens).toBe(2 * BLOCK);
    expect(roomy.printed).toMatch(/proven bound: the CPU tier bound is the optimum/);
    // Room for one: the first block, without which the second is no hit.
    const tight = await analyze(1);
    expect(tight.written.cpuTierBound).toMatchObject({ hitTokens: BLOCK, provenBoundTokens: BLOCK, ceilingHitTokens: 2 * BLOCK, percentOfCeiling: 50 });
  });
});
