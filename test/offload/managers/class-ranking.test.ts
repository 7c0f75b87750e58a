import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { ClassRanking } from '../../../src/offload/class-ranking.js';

/**
 * The class ranking's memory of which class of request looked each key up
 * last: an offer of the key counts toward that class, and a key no
 * remembered lookup had counts toward class 0.
 */

const CAPACITY = 16;

/** Class of a first turn of `blocks` looked-up blocks, as the ranking computes it. */
function firstTurnClass(blocks: number): number {
  return Math.min(7, Math.floor(Math.log2(blocks + 1)));
}

/** Keys `${tag}0` .. `${tag}${n - 1}`. */
function tagged(tag: string, n: number): BlockHash[] {
  return Array.from({ length: n }, (_, i) => `${tag}${i}`);
}

/** A deterministic stream of numbers in [0, 1). */
function randomStream(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0;
    return x / 2 ** 32;
  };
}

describe('class ranking key classes', () => {
  it('gives a key no request looked up class 0', () => {
    const ranking = new ClassRanking(CAPACITY, 64);
    ranking.lookedUp(tagged('seen', 3), true);
    expect(ranking.classOfKey('never-looked-up')).toBe(0);
    expect(ranking.classOfKey('0123456789abcdef')).toBe(0);
  });

  it('gives a key the class of the latest request that looked it up', () => {
    const ranking = new ClassRanking(CAPACITY, 64);
    const shared = tagged('p', 3);
    ranking.lookedUp(shared, false);
    expect(ranking.classOfKey('p1')).toBe(firstTurnClass(3));
    ranking.lookedUp([...shared, ...tagged('q', 4)], true);
    expect(ranking.classOfKey('p1')).toBe(8 + firstTurnClass(7));
    expect(ranking.classOfKey('q3')).toBe(8 + firstTurnClass(7));
  });

  it('forgets the keys first seen longest ago past its memory, and knows a forgotten key again once looked up', () => {
    const ranking = new ClassRanking(CAPACITY, 4);
    ranking.lookedUp(tagged('old', 3), false);
    ranking.lookedUp(tagged('new', 3), false);
    expect(tagged('old', 3).map((key) => ranking.classOfKey(key))).toEqual([0, 0, firstTurnClass(3)]);
    ranking.lookedUp(['old0'], true);
    expect(ranking.classOfKey('old0')).toBe(8 + firstTurnClass(1));
  });

  it.each([
    // Many more distinct keys than the memory: keys are forgotten and their room is reused.
    { memory: 300, distinct: 7_000 },
    // Room for most keys: the filter in front of the map is rebuilt larger several times as it fills.
    { memory: 20_000, distinct: 12_000 },
  ])('answers every key as a map of the latest lookups would, through forgetting and class changes ($memory keys remembered)', ({ memory, distinct }) => {
    const ranking = new ClassRanking(CAPACITY, memory);
    // The reference: the documented rule, as a plain map in order of first sight.
    const expected = new Map<BlockHash, number>();
    const next = randomStream(7);
    // Block hashes (16 hex digits) and other text alike.
    const key = (): BlockHash => {
      const n = Math.floor(next() * distinct);
      return n % 2 === 0 ? `${n}` : n.toString(16).padStart(16, 'c');
    };
    for (let round = 0; round < 1_500; round++) {
      const keys = Array.from({ length: 1 + Math.floor(next() * 20) }, key);
      const continuing = next() < 0.5;
      ranking.lookedUp(keys, continuing);
      const c = (continuing ? 8 : 0) + firstTurnClass(keys.length);
      for (const k of keys) {
        if (expected.get(k) === c) continue;
        expected.delete(k);
        expected.set(k, c);
      }
      while (expected.size > memory) expected.delete(expected.keys().next().value as BlockHash);
      for (let probe = 0; probe < 20; probe++) {
        const k = key();
        expect(ranking.classOfKey(k), `class of ${k} after round ${round}`).toBe(expected.get(k) ?? 0);
      }
    }
  });
});
