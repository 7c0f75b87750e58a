import { describe, expect, it } from 'vitest';
import { parseSweepPolicy, runSweep } from '../../src/bench/sweep.js';
import { replayGeometry, replaySliceOf } from '../../src/bench/policies.js';
import { recordTierStream } from '../../src/bench/tier-stream-replay.js';
import { tierStreamBound, tierStreamCeiling, tierStreamProvenBound } from '../../src/bench/tier-stream-belady.js';
import type { TierEvent } from '../../src/bench/tier-stream.js';
import { loadTrace } from '../../src/workload/trace.js';
import { Rng } from '../support/random.js';
import { traceFile } from '../support/sweep-fixture.js';
import { lookup, offer, ONLINE_POLICIES, playOnline, readmission, stream } from '../support/tier-stream-player.js';

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

const BUSY = { maxRequests: 200, tokenScale: 32, gpuBlocks: 64, blockSize: 4, offloadFactor: 1 };

const bound = (events: TierEvent[], capacity: number) => tierStreamBound(stream(events), capacity);
const proven = (events: TierEvent[], capacity: number) => tierStreamProvenBound(stream(events), capacity);
const ceiling = (events: TierEvent[]) => tierStreamCeiling(stream(events));

/**
 * Requests that continue conversations at random, some behind a GPU hit on
 * their first block, some preempted and resumed; each computes and offers
 * new blocks after its lookup.
 */
function randomStream(seed: number, requests = 30): TierEvent[] {
  const rng = new Rng(seed);
  let next = 0;
  const conversations: number[][] = [];
  const events: TierEvent[] = [];
  for (let r = 0; r < requests; r++) {
    if (conversations.length === 0 || rng.chance(0.4)) {
      const blocks = Array.from({ length: rng.nextInt(1, 3) }, () => next++);
      conversations.push(blocks);
      events.push(offer(blocks));
      continue;
    }
    const chain = conversations[rng.below(conversations.length)];
    const gpuHit = rng.nextInt(0, Math.min(1, chain.length - 1));
    events.push(lookup(chain.slice(gpuHit), { firstDepth: gpuHit }));
    if (rng.chance(0.1)) events.push(readmission(chain.slice(gpuHit)));
    const computed = Array.from({ length: rng.nextInt(1, 2) }, () => next++);
    chain.push(...computed);
    events.push(offer(computed));
  }
  return events;
}

/**
 * Request A computes blocks 0-2; B reads 0-1; C computes block 3, which D
 * reads; E reads 0-2.
 */
const SHARED_PREFIX = [offer([0, 1, 2]), lookup([0, 1]), offer([3]), lookup([3]), lookup([0, 1, 2])];

describe('the CPU tier\'s bound behind the GPU tier', () => {
  it('keeps the blocks looked up soonest, the shallow ones first among equals, and admits no block used after every held one', () => {
    // Room for 2: block 2 (read last) is not admitted, B hits 0-1; then 1 (deeper than 0) leaves for 3, D hits 3; E hits 0.
    expect(bound(SHARED_PREFIX, 2)).toEqual({ hitBlocks: 4, hitTokens: 64 });
    // Room for 3: B hits 0-1, D hits 3 while block 2 waits outside, E hits 0-1.
    expect(bound(SHARED_PREFIX, 3)).toEqual({ hitBlocks: 5, hitTokens: 80 });
    // Room for everything: every lookup hits whole.
    expect(bound(SHARED_PREFIX, 4)).toEqual({ hitBlocks: 6, hitTokens: 96 });
    expect(bound(SHARED_PREFIX, 0)).toEqual({ hitBlocks: 0, hitTokens: 0 });
  });

  it('counts the tokens past the GPU hit, never the request\'s last token, and only blocks offered before the lookup', () => {
    const events = [lookup([0, 1, 2]), offer([0, 1, 2]), lookup([1, 2], { coveredTokens: 4, firstDepth: 1 }), lookup([0, 1], { maxHitTokens: 31 }), lookup([0, 3, 2])];
    // 2 x 16 - 4, then a block-aligned 32-token prompt served but for its last token, then block 0 alone.
    expect(bound(events, 100)).toEqual({ hitBlocks: 5, hitTokens: 28 + 31 + 16 });
    expect(ceiling(events)).toEqual({ hitBlocks: 5, hitTokens: 28 + 31 + 16 });
  });

  it('counts a request\'s reuse once: a lookup at readmission after a preemption neither hits nor keeps a block', () => {
    // B looks 0-1 up, is preempted, and looks them up again when it resumes.
    expect(bound([offer([0, 1]), lookup([0, 1]), readmission([0, 1])], 2)).toEqual({ hitBlocks: 2, hitTokens: 32 });
    expect(ceiling([offer([0, 1]), lookup([0, 1]), readmission([0, 1])])).toEqual({ hitBlocks: 2, hitTokens: 32 });
    // Room for 1: keeping block 0 for the readmitted request would cost the next request's hit on block 1.
    const events = [offer([0]), offer([1]), readmission([0]), lookup([1])];
    expect(bound(events, 1)).toEqual({ hitBlocks: 1, hitTokens: 16 });
  });

  it('lies under a proven bound that counts every held block and may write at any lookup, where MIN\'s prefix rule misjudges', () => {
    // Room for 1; A reads block 0 once, three later requests read block 1, which is never offered again.
    const events = [offer([0, 1]), lookup([0]), lookup([1], { firstDepth: 1 }), lookup([1], { firstDepth: 1 }), lookup([1], { firstDepth: 1 })];
    // MIN keeps block 0 (looked up first) and so loses block 1 for good: one hit, where keeping block 1 gets three.
    expect(bound(events, 1)).toEqual({ hitBlocks: 1, hitTokens: 16 });
    expect(proven(events, 1)).toEqual({ hitBlocks: 3, hitTokens: 48 });
    expect(ceiling(events)).toEqual({ hitBlocks: 4, hitTokens: 64 });
  });

  it('equals the unbounded tier\'s ceiling once everything fits, and never exceeds it', () => {
    expect(ceiling(SHARED_PREFIX)).toEqual({ hitBlocks: 6, hitTokens: 96 });
    for (const capacity of [0, 1, 2, 3, 4, 100]) expect(bound(SHARED_PREFIX, capacity).hitTokens).toBeLessThanOrEqual(96);
    expect(bound(SHARED_PREFIX, 100)).toEqual(ceiling(SHARED_PREFIX));
  });

  it('is at least every online policy\'s hits over the same stream, at every capacity', () => {
    const streams: TierEvent[][] = [
      SHARED_PREFIX,
      [offer([0]), offer([1]), readmission([0]), lookup([1])],
      // Two conversations of three turns, interleaved, behind a one-off.
      [offer([0, 1]), offer([5, 6]), offer([9, 10, 11]), lookup([0, 1]), offer([2]), lookup([5, 6]), offer([7]), lookup([0, 1, 2]), lookup([5, 6, 7])],
    ];
    for (const events of streams) {
      for (const capacity of [1, 2, 3, 4, 8]) {
        const optimum = bound(events, capacity).hitBlocks;
        expect(optimum).toBeLessThanOrEqual(ceiling(events).hitBlocks);
        for (const policy of ONLINE_POLICIES) {
          expect(playOnline(events, policy, capacity), `${policy.label} at ${capacity}`).toBeLessThanOrEqual(optimum);
        }
      }
    }
  });

  it('never lets an online policy beat the proven bound on random streams, and lies between it and the ceiling', () => {
    let policyHits = 0;
    for (let seed = 1; seed <= 60; seed++) {
      const events = randomStream(seed);
      const most = ceiling(events).hitTokens;
      for (const capacity of [1, 2, 3, 5, 8]) {
        const provenTokens = proven(events, capacity).hitTokens;
        expect(bound(events, capacity).hitTokens).toBeLessThanOrEqual(provenTokens);
        expect(provenTokens).toBeLessThanOrEqual(most);
        for (const policy of ONLINE_POLICIES) {
          const hits = playOnline(events, policy, capacity) * 16;
          policyHits += hits;
          expect(hits, `${policy.label} at ${capacity}, seed ${seed}`).toBeLessThanOrEqual(provenTokens);
        }
      }
    }
    // The policies do hit: the check is not vacuous.
    expect(policyHits).toBeGreaterThan(0);
  });
});

describe('the stream recorded from a replay', () => {
  it('counts one lookup per request and flags the lookups of requests resumed after a preemption', async () => {
    const trace = await loadTrace(traceFile(busyConversationLines(1)), { maxRequests: BUSY.maxRequests, tokenScale: BUSY.tokenScale });
    const slice = replaySliceOf(trace);
    const recorded = await recordTierStream(slice, { gpuBlocks: 40, geometry: replayGeometry(BUSY.blockSize, BUSY.offloadFactor) });
    const lookups = recorded.events.filter((e) => e.kind === 'lookup');
    expect(lookups.filter((l) => !l.readmission).length).toBeLessThanOrEqual(slice.requests.length);
    // The pool is small enough that requests are preempted and look their prefix up again.
    expect(lookups.some((l) => l.readmission)).toBe(true);
    const firstOnly = { ...recorded, events: recorded.events.filter((e) => e.kind === 'offer' || !e.readmission) };
    for (const capacity of [8, 64, 4096]) expect(tierStreamBound(recorded, capacity)).toEqual(tierStreamBound(firstOnly, capacity));
  });
});

describe('the sweep\'s CPU tier bound', () => {
  it('is one replay\'s bound per capacity, at most the ceiling, equal to it once everything fits, and the shares are of it', async () => {
    for (const seed of [1, 2]) {
      const result = await runSweep({ ...BUSY, traceFile: traceFile(busyConversationLines(seed)), cpuBlocks: [8, 24, 64, 1 << 20], policies: ['lru', 's3fifo'].map(parseSweepPolicy) });
      // The slice is busy enough that the GPU tier serves part of what returns.
      expect(result.baseline.gpuPrefixHitTokens).toBeGreaterThan(0);
      const bounds = result.cpuTierBound.map((b) => b.hitTokens);
      expect(bounds).toEqual([...bounds].sort((a, b) => a - b));
      expect(bounds.at(-1)).toBe(result.cpuTierCeilingHitTokens);
      expect(result.cpuTierCeilingHitTokens).toBeGreaterThan(bounds[0]);
      for (const b of result.cpuTierBound) {
        expect(b.hitTokens).toBeLessThanOrEqual(b.provenBoundTokens);
        expect(b.provenBoundTokens).toBeLessThanOrEqual(result.cpuTierCeilingHitTokens);
      }
      for (const point of result.points) {
        expect(point.verified).toBe(point.requests);
        const capacityBound = result.cpuTierBound.find((b) => b.cpuBlocks === point.cpuBlocks)?.hitTokens;
        expect(point.cpuTierBoundHitTokens).toBe(capacityBound);
        expect(point.cpuTierBoundHitTokens).toBeLessThanOrEqual(result.cpuTierCeilingHitTokens);
        expect(point.shareOfCpuTierBound).toBeCloseTo(point.cpuHitTokens / point.cpuTierBoundHitTokens, 12);
      }
    }
  });
});
