import { describe, expect, it } from 'vitest';
import { parseSweepPolicy, runSweep } from '../../src/bench/sweep.js';
import type { TierEvent, TierStream } from '../../src/bench/tier-stream.js';
import { simulateTierStreamBelady } from '../../src/bench/tier-stream-belady.js';
import { Rng } from '../support/random.js';
import { traceFile } from '../support/sweep-fixture.js';

/**
 * Multi-turn conversations with a shared system prompt, arriving faster than
 * a small GPU pool serves them: turns overlap, the GPU prefix cache serves
 * some prefixes itself and evicts others, one-off prompts come between.
 */
function busyConversationLines(seed: number, conversations = 40): object[] {
  const rng = new Rng(seed);
  let nextHash = 100;
  const open: { ids: number[]; turnsLeft: number }[] = [];
  const lines: object[] = [];
  let t = 0;
  let started = 0;
  while (started < conversations || open.length > 0) {
    if (started < conversations && (open.length === 0 || rng.chance(0.4))) {
      open.push({ ids: [0, nextHash++], turnsLeft: rng.nextInt(1, 4) });
      started++;
    }
    const c = rng.below(open.length);
    const conversation = open[c];
    conversation.ids.push(...Array.from({ length: rng.nextInt(1, 2) }, () => nextHash++));
    lines.push({ timestamp: t, input_length: conversation.ids.length * 512 - rng.nextInt(0, 100), output_length: rng.nextInt(16, 96), hash_ids: [...conversation.ids] });
    if (--conversation.turnsLeft === 0) open.splice(c, 1);
    if (rng.chance(0.3)) lines.push({ timestamp: t, input_length: 1536, output_length: 16, hash_ids: [nextHash++, nextHash++, nextHash++] });
    t += rng.nextInt(0, 1500);
  }
  return lines;
}

function lookup(blocks: number[], coveredTokens = 0, firstDepth = 0): TierEvent {
  return { kind: 'lookup', blocks: Int32Array.from(blocks), firstDepth, coveredTokens };
}

function offer(blocks: number[]): TierEvent {
  return { kind: 'offer', blocks: Int32Array.from(blocks) };
}

function stream(events: TierEvent[], blockTokens = 16): TierStream {
  const uniqueBlocks = 1 + Math.max(...events.flatMap((e) => [...e.blocks]));
  return { blockTokens, events, uniqueBlocks };
}

describe('the optimum over the stream the CPU tier sees behind the GPU tier', () => {
  it('is at least every policy\'s hits at each capacity, and at most the whole-trace optimum', async () => {
    const policies = ['lru', 'arc', 'lhd', 's3fifo', 'reuse:2', 's3fifo/on-evict'];
    for (const seed of [1, 2]) {
      const result = await runSweep({
        traceFile: traceFile(busyConversationLines(seed)),
        maxRequests: 200,
        tokenScale: 32,
        gpuBlocks: 64,
        blockSize: 4,
        offloadFactor: 1,
        cpuBlocks: [8, 24, 64, 4096],
        policies: policies.map(parseSweepPolicy),
      });
      // The slice is busy enough that the GPU tier serves part of what returns.
      expect(result.baseline.gpuPrefixHitTokens).toBeGreaterThan(0);
      for (const point of result.points) {
        expect(point.verified).toBe(point.requests);
        expect(point.tierOptimalCpuHitTokens, `${point.policy} at ${point.cpuBlocks}`).toBeGreaterThanOrEqual(point.cpuHitTokens);
        expect(point.tierOptimalCpuHitTokens).toBeLessThanOrEqual(point.optimalCpuHitTokens);
        expect(point.shareOfTierOptimal).toBeCloseTo(point.cpuHitTokens / point.tierOptimalCpuHitTokens, 12);
      }
      // Policies hit in the tier, and the bound behind the GPU tier is tighter than the whole-trace one somewhere.
      expect(Math.max(...result.points.map((p) => p.cpuHitTokens))).toBeGreaterThan(0);
      expect(result.points.some((p) => p.tierOptimalCpuHitTokens < p.optimalCpuHitTokens)).toBe(true);
    }
  });

  it('counts only blocks offered before the lookup, from the first looked-up block on, past the GPU hit', () => {
    const events = [lookup([0, 1, 2]), offer([0, 1, 2]), lookup([1, 2], 4, 1), lookup([0, 3, 2])];
    // The second lookup hits blocks 1 and 2 less the 4 tokens its GPU hit covered; the third hits block 0 only.
    expect(simulateTierStreamBelady(stream(events), 100)).toEqual({ hitBlocks: 3, hitTokens: 2 * 16 - 4 + 16 });
  });

  it('keeps, in a full tier, the blocks looked up soonest and drops an offer never looked up', () => {
    const events = [offer([0, 1]), offer([2]), lookup([1]), lookup([0]), offer([3]), lookup([0]), lookup([1])];
    // Room for 2: block 2 is never looked up and goes at once; then 3 goes (never used) and 0, 1 stay.
    expect(simulateTierStreamBelady(stream(events), 2)).toEqual({ hitBlocks: 4, hitTokens: 64 });
    // Room for 1: block 1 is looked up first, so it stays and block 0 goes; 0 is never offered again.
    expect(simulateTierStreamBelady(stream(events), 1).hitBlocks).toBe(2);
  });
});
