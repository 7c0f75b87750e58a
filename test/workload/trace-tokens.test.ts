import { describe, expect, it } from 'vitest';
import { traceBlockTokens, tracePromptTokens } from '../../src/workload/trace-tokens.js';

const VOCAB = 32000;

/** Number of leading tokens two prompts share. */
function sharedPrefix(a: Int32Array, b: Int32Array): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe('trace token blocks', () => {
  it('gives equal hash ids equal token blocks', () => {
    expect(traceBlockTokens(42, 512, VOCAB)).toEqual(traceBlockTokens(42, 512, VOCAB));
  });

  it('gives different hash ids different token blocks', () => {
    expect(traceBlockTokens(42, 512, VOCAB)).not.toEqual(traceBlockTokens(43, 512, VOCAB));
  });

  it('keeps every token inside the vocabulary', () => {
    const tokens = traceBlockTokens(7, 4096, 50);
    expect(Math.min(...tokens)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...tokens)).toBeLessThan(50);
  });

  it('makes a scaled block the prefix of the full block', () => {
    expect(traceBlockTokens(9, 64, VOCAB)).toEqual(traceBlockTokens(9, 512, VOCAB).subarray(0, 64));
  });
});

describe('trace prompts', () => {
  it('concatenates the blocks and cuts the last one to the prompt length', () => {
    const prompt = tracePromptTokens([3, 4], 700, 512, VOCAB);
    expect(prompt).toHaveLength(700);
    expect(prompt.subarray(0, 512)).toEqual(traceBlockTokens(3, 512, VOCAB));
    expect(prompt.subarray(512)).toEqual(traceBlockTokens(4, 188, VOCAB));
  });

  it('turns shared leading hash ids into a shared token prefix, and only that', () => {
    const a = tracePromptTokens([1, 2, 3], 1500, 512, VOCAB);
    const b = tracePromptTokens([1, 2, 9], 1500, 512, VOCAB);
    expect(sharedPrefix(a, b)).toBeGreaterThanOrEqual(1024);
    expect(sharedPrefix(a, b)).toBeLessThan(1030);
  });

  it('keeps prefix sharing when lengths are scaled down', () => {
    const a = tracePromptTokens([1, 2, 3], 188, 64, VOCAB);
    const b = tracePromptTokens([1, 2, 9], 170, 64, VOCAB);
    expect(sharedPrefix(a, b)).toBeGreaterThanOrEqual(128);
    expect(sharedPrefix(a, b)).toBeLessThan(134);
  });

  it('refuses a prompt longer than its blocks', () => {
    expect(() => tracePromptTokens([1], 513, 512, VOCAB)).toThrow(RangeError);
  });
});
