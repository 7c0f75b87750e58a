import { describe, expect, it } from 'vitest';
import { TINY } from '../support/tiny.js';
import { mix } from '../../src/model/mix.js';
import {
  chainStates,
  elementValue,
  positionSum,
  rankDigest,
  referenceGenerate,
  sampleToken,
} from '../../src/model/reference.js';


/** Digest over all heads computed element by element, the slow obvious way. */
function slowFullDigest(tokens: number[], n: number): number {
  const states = chainStates(TINY, tokens.slice(0, n));
  let g = 0;
  for (let p = 0; p < n; p++) {
    let sum = 0;
    for (let l = 0; l < TINY.layers; l++)
      for (let k = 0; k < 2; k++)
        for (let h = 0; h < TINY.kvHeads; h++)
          for (let d = 0; d < TINY.headDim; d++) sum = (sum + elementValue(TINY, states[p], l, k, h, d)) >>> 0;
    g = (g + Math.imul(p + 1, sum)) >>> 0;
  }
  return g;
}

describe('reference model', () => {
  it('mix is murmur3 fmix32', () => {
    // Known fmix32 values.
    expect(mix(0)).toBe(0);
    expect(mix(1)).toBe(0x514e28b7);
    expect(mix(0xffffffff)).toBe(0x81f16f39);
  });

  it('stores the chain state in layer 0 K slots d=0 and d=1 of every head', () => {
    const [s] = chainStates(TINY, [42]);
    for (let h = 0; h < TINY.kvHeads; h++) {
      expect(elementValue(TINY, s, 0, 0, h, 0)).toBe(s & 0xffff);
      expect(elementValue(TINY, s, 0, 0, h, 1)).toBe(s >>> 16);
    }
    // V slots and other layers are ordinary elements.
    expect(elementValue(TINY, s, 0, 1, 0, 0)).not.toBe(s & 0xffff);
  });

  it('position sums over head shards add up to the sum over all heads', () => {
    const [s] = chainStates(TINY, [7]);
    const whole = positionSum(TINY, s, 0, TINY.kvHeads);
    for (const tp of [1, 2, 4]) {
      let parts = 0;
      for (let r = 0; r < tp; r++) parts = (parts + positionSum(TINY, s, (r * TINY.kvHeads) / tp, TINY.kvHeads / tp)) >>> 0;
      expect(parts).toBe(whole);
    }
  });

  it('rank digests summed over ranks equal the full digest for tp = 1, 2 and 4', () => {
    const tokens = [5, 9, 1200, 31999, 0, 17, 17, 4];
    const full = slowFullDigest(tokens, tokens.length);
    for (const tp of [1, 2, 4]) {
      let sum = 0;
      for (let r = 0; r < tp; r++) sum = (sum + rankDigest(TINY, tp, r, tokens, tokens.length)) >>> 0;
      expect(sum).toBe(full);
    }
  });

  it('generates maxTokens tokens, each sampled from the digest of everything before it', () => {
    const prompt = [3, 1, 4, 1, 5, 9, 2, 6];
    const { outputTokens, finishReason } = referenceGenerate(TINY, { promptTokens: prompt, maxTokens: 5, seed: 11 });
    expect(finishReason).toBe('length');
    expect(outputTokens).toHaveLength(5);
    const all = [...prompt];
    for (const token of outputTokens) {
      expect(token).toBe(sampleToken(slowFullDigest(all, all.length), 11, all.length, TINY.vocabSize));
      all.push(token);
    }
  });

  it('stops at the stop token and includes it', () => {
    const prompt = [10, 20, 30];
    const free = referenceGenerate(TINY, { promptTokens: prompt, maxTokens: 6, seed: 1 });
    const stop = free.outputTokens[2];
    const stopped = referenceGenerate(TINY, { promptTokens: prompt, maxTokens: 6, seed: 1, stopToken: stop });
    expect(stopped.finishReason).toBe('stopped');
    expect(stopped.outputTokens).toEqual(free.outputTokens.slice(0, free.outputTokens.indexOf(stop) + 1));
  });

  it('a different seed or a different earlier token changes the output', () => {
    const a = referenceGenerate(TINY, { promptTokens: [1, 2, 3, 4], maxTokens: 4, seed: 1 }).outputTokens;
    const b = referenceGenerate(TINY, { promptTokens: [1, 2, 3, 4], maxTokens: 4, seed: 2 }).outputTokens;
    const c = referenceGenerate(TINY, { promptTokens: [0, 2, 3, 4], maxTokens: 4, seed: 1 }).outputTokens;
    expect(b).not.toEqual(a);
    expect(c).not.toEqual(a);
  });
});
