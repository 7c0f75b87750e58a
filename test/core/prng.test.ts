import { describe, expect, it } from 'vitest';
import { SeededRandom, seedFrom } from '../../src/core/prng.js';

function draws(seed: number, count: number): number[] {
  const random = new SeededRandom(seed);
  return Array.from({ length: count }, () => random.nextUint32());
}

describe('the seeded generator', () => {
  it('replays the same stream from the same seed, and another from another seed', () => {
    expect(draws(7, 50)).toEqual(draws(7, 50));
    expect(draws(8, 50)).not.toEqual(draws(7, 50));
    expect(seedFrom(1, 2)).not.toBe(seedFrom(2, 1));
  });

  it('draws uniforms in [0, 1), integers in their range, and every item of a list', () => {
    const random = new SeededRandom(3);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) {
      const u = random.next();
      expect(u).toBeGreaterThanOrEqual(0);
      expect(u).toBeLessThan(1);
      const k = random.nextInt(-2, 2);
      expect(k).toBeGreaterThanOrEqual(-2);
      expect(k).toBeLessThanOrEqual(2);
      counts[random.below(4)] += 1;
    }
    // Each of four outcomes near a quarter of the draws.
    for (const count of counts) expect(count).toBeGreaterThan(800);
    expect(new Set(Array.from({ length: 200 }, () => random.pick(['a', 'b', 'c'])))).toEqual(new Set(['a', 'b', 'c']));
    expect(random.chance(0)).toBe(false);
    expect(random.chance(1)).toBe(true);
    expect(() => random.pick([])).toThrow(/no items/);
  });
});
