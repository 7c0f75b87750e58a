import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/runtime/engine.js';
import {
  expectAllMatchReference,
  expectIdle,
  FAST,
  runWaves,
  sharedPrefixRequests,
  tokens,
  withEngine,
} from './helpers.js';

describe.each([1, 2, 4])('the engine end to end with tp = %i (host backend)', (tp) => {
  it('serves requests sharing a prefix with the tokens of the reference model', async () => {
    await withEngine({ ...FAST, tp, gpuBlocks: 256, cpuBlocks: 512 }, async (engine) => {
      const prefix = tokens(tp, 100);
      const finished = await runWaves(engine, [sharedPrefixRequests(prefix, 12, 30, 12, tp)]);
      expectAllMatchReference(finished, 12);
      expect(engine.metrics().hits.gpuPrefixTokens).toBeGreaterThan(0);
      await expectIdle(engine);
    });
  });

  it('reloads evicted prefixes from the CPU tier and still answers exactly', async () => {
    // Eight prompts of 8 blocks each cycle through a 24-block GPU pool.
    await withEngine({ ...FAST, tp, gpuBlocks: 24, cpuBlocks: 1024, maxNumSeqs: 2 }, async (engine) => {
      const first = Array.from({ length: 8 }, (_, i) => ({ id: `a${i}`, promptTokens: tokens(500 + i, 120), maxTokens: 8, seed: i }));
      // The same prompts again, after the small GPU pool has cycled through the others.
      const again = first.map((r, i) => ({ ...r, id: `b${i}`, seed: 50 + i }));
      const finished = await runWaves(engine, [first, again]);
      expectAllMatchReference(finished, 16);
      const m = engine.metrics();
      expect(m.hits.cpuTierTokens).toBeGreaterThan(0);
      expect(m.transfers.cpuToGpu.jobs).toBeGreaterThan(0);
      expect(m.transfers.gpuToCpu.bytes).toBeGreaterThan(0);
      await expectIdle(engine);
    });
  });

  it('survives a preemption storm in a GPU pool far too small for the batch', async () => {
    await withEngine({ ...FAST, tp, gpuBlocks: 24, cpuBlocks: 256, maxNumSeqs: 8 }, async (engine) => {
      // Eight prompts of 2-3 blocks all fit the 24-block pool in the first step; each then grows by 3-4 blocks
      // before any finishes, so preemption follows from block counts alone, not from when transfers land.
      const requests = Array.from({ length: 10 }, (_, i) => ({
        id: `p${i}`,
        promptTokens: tokens(900 + i, 30 + ((i * 7) % 16)),
        maxTokens: 50 + (i % 3) * 10,
        seed: i,
      }));
      const finished = await runWaves(engine, [requests]);
      expectAllMatchReference(finished, 10);
      expect(engine.metrics().preemptions).toBeGreaterThan(0);
      await expectIdle(engine);
    });
  });

  it('prefills long prompts in chunks across steps', async () => {
    await withEngine(
      { ...FAST, tp, gpuBlocks: 512, cpuBlocks: 256, maxNumBatchedTokens: 128, maxModelLen: 4096 },
      async (engine) => {
        const requests = [0, 1, 2].map((i) => ({ id: `long${i}`, promptTokens: tokens(70 + i, 1500 + 37 * i), maxTokens: 6, seed: i }));
        const finished = await runWaves(engine, [requests]);
        expectAllMatchReference(finished, 3);
        expect(engine.metrics().steps).toBeGreaterThan((3 * 1500) / 128);
        await expectIdle(engine);
      },
    );
  });
});

describe('engine lifecycle', () => {
  it('shuts every rank thread down', async () => {
    const engine = await Engine.create({ backend: 'host', model: 'tiny', tp: 4, gpuBlocks: 32 });
    expect(engine.liveRankThreads()).toBe(4);
    await engine.shutdown();
    expect(engine.liveRankThreads()).toBe(0);
  });

  it('rejects a bad request with a clear error and keeps what it accepted before', async () => {
    await withEngine({ ...FAST, tp: 2, gpuBlocks: 64 }, async (engine) => {
      const ok = engine.addRequest({ id: 'ok', promptTokens: tokens(1, 20), maxTokens: 3 });
      expect(() => engine.addRequest({ id: 'bad', promptTokens: [1, 2, 99999999], maxTokens: 3 })).toThrow(/promptTokens\[2\]/);
      await expect(engine.addRequests([{ promptTokens: [1], maxTokens: 1 }, { promptTokens: [], maxTokens: 1 }])).rejects.toThrow(/empty/);
      const finished = await engine.run();
      expect(finished.map((f) => f.id)).toEqual([ok]);
      expectAllMatchReference(finished, 1);
    });
  });

  it('aborts requests in flight and frees their blocks', async () => {
    await withEngine({ ...FAST, tp: 2, gpuBlocks: 64, cpuBlocks: 64 }, async (engine) => {
      const ids = sharedPrefixRequests(tokens(3, 40), 4, 20, 30).map((r) => engine.addRequest(r));
      await engine.step();
      await engine.step();
      expect(engine.abort(ids[1])).toBe(true);
      expect(engine.abort(ids[1])).toBe(false);
      const finished = await engine.run();
      const aborted = finished.filter((f) => f.finishReason === 'aborted').map((f) => f.id);
      expect(aborted).toEqual([ids[1]]);
      expectAllMatchReference(finished, 3);
      await expectIdle(engine);
    });
  });
});
