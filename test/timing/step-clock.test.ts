import { describe, expect, it } from 'vitest';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import type { ModelShape } from '../../src/model/shape.js';
import { GPU_PROFILES, type GpuProfile } from '../../src/timing/gpu-profiles.js';
import { linkJobNs, LinkSchedule } from '../../src/timing/link-model.js';
import { FlatStepClock, RooflineStepClock, StepWorkTally, stepClockFor } from '../../src/timing/step-cost.js';

/** A model small enough to price by hand: 1,000 weights, 10 x 8 vocabulary matrices, 32 KV bytes per token. */
const HAND_MODEL: ModelShape = {
  name: 'hand', layers: 2, kvHeads: 1, headDim: 4, vocabSize: 10, modelSeed: 1, parameters: 1000, hiddenSize: 8, attentionHeads: 2,
};
const HAND_GPU: GpuProfile = {
  name: 'h100-sxm', label: 'hand', peakFlops: 1e12, memoryBytesPerSecond: 1e9, linkMeasured: false,
  link: { oneWayBytesPerSecond: 1e9, bothWaysBytesPerSecond: 1.5e9, jobLatencyUs: 2, regionOverheadNs: 100 },
};
const EXACT = { matmul: 1, attention: 1, memory: 1, stepOverheadUs: 0 };

function work(...requests: [start: number, tokens: number, sampled: boolean][]): StepWorkTally {
  const tally = new StepWorkTally();
  for (const [start, tokens, sampled] of requests) tally.add(start, tokens, sampled);
  return tally;
}

describe('the step clock', () => {
  it('counts a step of new tokens after cached ones as the attention pairs and context it visits', () => {
    const tally = work([3, 2, true], [10, 1, true]);
    // 2 tokens after 3: pairs 4 + 5; 1 token after 10: 11 pairs.
    expect(tally).toMatchObject({ requests: 2, tokens: 3, sampledTokens: 2, attendedPairs: 20, contextTokens: 16 });
    tally.reset();
    expect(tally).toMatchObject({ requests: 0, tokens: 0, attendedPairs: 0, contextTokens: 0 });
  });

  it('prices a memory-bound step by the weights once plus the KV read and written, over the bandwidth', () => {
    const clock = new RooflineStepClock(HAND_MODEL, HAND_GPU, 1, EXACT);
    const step = work([3, 2, true]);
    // Dense 2 x (1000 - 160) x 2 + 2 x 80 x 1 = 3,520 FLOPs; attention 4 x 2 layers x 2 heads x 4 dims x 9 pairs = 576.
    expect(clock.flops(step)).toEqual({ dense: 3520, attention: 576 });
    // Weights without the input embedding (920 x 2 B) + 32 B x (5 read + 2 written) = 2,064 B at 1 GB/s.
    expect(clock.bytes(step)).toBe(2064);
    expect(clock.computeNs(step)).toBe(2064);
    // Two ranks each hold half the weights and heads.
    expect(new RooflineStepClock(HAND_MODEL, HAND_GPU, 2, EXACT).computeNs(step)).toBe(1032);
  });

  it('prices a compute-bound step by its FLOPs at each kind of work\'s share of peak, plus the fixed cost', () => {
    const fastMemory = { ...HAND_GPU, memoryBytesPerSecond: 1e18 };
    const clock = new RooflineStepClock(HAND_MODEL, fastMemory, 1, { matmul: 0.5, attention: 0.25, memory: 1, stepOverheadUs: 3 });
    // 3,520 / (1e12 x 0.5) + 576 / (1e12 x 0.25) s = 7.04 + 2.304 ns, then 3,000 ns of fixed cost.
    expect(clock.computeNs(work([3, 2, true]))).toBe(3009);
    expect(clock.computeNs(new StepWorkTally())).toBe(0);
  });

  it('never prices a llama-8b decode step on an H100 below one read of the weights, nor a prefill below its FLOPs at peak', () => {
    const clock = stepClockFor(MODEL_PRESETS['llama-8b'], GPU_PROFILES['h100-sxm'], 1);
    const weightsReadNs = (16.06e9 / 3.35e12) * 1e9;
    for (const batch of [1, 8, 64, 256]) {
      const decode = work(...Array.from({ length: batch }, (): [number, number, boolean] => [1000, 1, true]));
      expect(clock.computeNs(decode)).toBeGreaterThan(weightsReadNs * 0.93);
    }
    const prefill = work([0, 2048, true]);
    const peakNs = ((2 * 8.03e9 * 2048) / 989.4e12) * 1e9;
    expect(clock.computeNs(prefill)).toBeGreaterThan(peakNs * 0.87);
    // Attention grows with context: the same 2,048 tokens after 30,000 cached ones cost more.
    expect(clock.computeNs(work([30000, 2048, true]))).toBeGreaterThan(clock.computeNs(prefill) * 1.5);
  });

  it('keeps a flat cost per token when the model sets one, shared by the ranks', () => {
    const clock = stepClockFor({ ...HAND_MODEL, computeNsPerToken: 1000 }, HAND_GPU, 4);
    expect(clock).toBeInstanceOf(FlatStepClock);
    expect(clock.computeNs(work([0, 8, true], [9, 1, true]))).toBe(2250);
  });
});

describe('the host link', () => {
  it('takes a job\'s latency, its regions\' overhead and its bytes over the one-way rate', () => {
    // 2 us + 10 x 100 ns + 1 MB at 1 GB/s.
    expect(linkJobNs(HAND_GPU.link, 1e6, 10, false)).toBe(2000 + 1000 + 1e6);
    // Both directions busy: half the two-way rate each.
    expect(linkJobNs(HAND_GPU.link, 1e6, 10, true)).toBe(Math.round(3000 + 1e6 / 0.75));
  });

  it('runs one direction\'s jobs one after another, and both directions side by side at the shared rate', () => {
    const link = new LinkSchedule(HAND_GPU.link);
    const firstStore = link.book('gpuToCpu', 0, 1e6, 0);
    expect(firstStore).toBe(1_002_000);
    // Queued behind the first store.
    expect(link.book('gpuToCpu', 0, 1e6, 0)).toBe(2 * 1_002_000);
    // A load while stores run shares the link.
    expect(link.book('cpuToGpu', 0, 1e6, 0)).toBe(Math.round(2000 + 1e6 / 0.75));
  });
});
