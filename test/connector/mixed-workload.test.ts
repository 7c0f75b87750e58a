import { describe, expect, it } from 'vitest';
import { OffloadHarness, promptOf } from './helpers.js';

/**
 * Many requests sharing a few prefixes, arriving a few per step, through a
 * GPU pool far smaller than their working set: preemptions, GPU evictions,
 * loads of shared prefixes and stores interleave. Every configuration must
 * still give the reference tokens, keep every block the tier claims to hold
 * exact, and leave nothing behind.
 */
async function mixedWorkload(h: OffloadHarness, seed: number): Promise<void> {
  const prefixes = [12, 20, 8, 16, 12, 20].map((length, i) => promptOf(length, seed + i));
  let x = seed;
  const next = (n: number) => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return (x >>> 8) % n;
  };
  for (let wave = 0; wave < 6; wave++) {
    for (let i = 0; i < 3; i++) {
      const prefix = prefixes[next(prefixes.length)];
      const tail = promptOf(1 + next(9), seed * 100 + wave * 10 + i);
      h.add(`w${wave}-${i}`, { prompt: [...prefix, ...tail], maxTokens: 1 + next(8), seed: wave * 3 + i });
    }
    for (let s = 0; s < 3; s++) await h.step();
  }
  await h.runUntilIdle();
}

const CONFIGURATIONS = [
  { storePolicy: 'on-compute', eviction: 'lru', offloadFactor: 1 },
  { storePolicy: 'on-compute', eviction: 'arc', offloadFactor: 2 },
  { storePolicy: 'reuse:2', eviction: 'lru', offloadFactor: 1 },
  { storePolicy: 'on-evict', eviction: 'lru', offloadFactor: 1 },
  { storePolicy: 'on-compute', eviction: 's3fifo', offloadFactor: 2 },
  { storePolicy: 'on-compute', eviction: 'lhd', offloadFactor: 1 },
  { storePolicy: 'on-evict', eviction: 's3fifo', offloadFactor: 1 },
  { storePolicy: 'on-evict', eviction: 'arc', offloadFactor: 2 },
  { storePolicy: 'on-compute', eviction: 's3fifo+queue', offloadFactor: 2 },
  { storePolicy: 'on-evict', eviction: 'lru+queue', offloadFactor: 1 },
  { storePolicy: 'reuse:2', eviction: 's3fifo+queue', offloadFactor: 1 },
] as const;

describe('a mixed workload under every store policy', () => {
  for (const configuration of CONFIGURATIONS) {
    for (const latency of [1, 2]) {
      it(`gives the reference tokens and leaks nothing: ${configuration.eviction} + ${configuration.storePolicy}, f = ${configuration.offloadFactor}, job latency ${latency}`, async () => {
        const h = new OffloadHarness({
          ...configuration,
          cpuBlocks: 24,
          loadLatencySteps: latency,
          storeLatencySteps: latency,
          scheduler: { numGpuBlocks: 20, maxModelLen: 40, maxNumBatchedTokens: 32 },
        });
        await mixedWorkload(h, 11 + latency);
        expect(h.finished.size).toBe(18);
        expect(h.connector.metrics().cpuTierHitTokens).toBeGreaterThan(0);
        expect(h.wrongOutputs()).toEqual([]);
        expect(h.wrongTierBlocks()).toEqual([]);
        expect(await h.leaks()).toEqual([]);
      });
    }
  }
});
