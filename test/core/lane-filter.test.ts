import { describe, expect, it } from 'vitest';
import { LANE_FILTER_MAX_ROOM, LaneFilter } from '../../src/core/lane-filter.js';
import { Rng } from '../support/random.js';

/** Random 64-bit keys as lane pairs. */
function randomKeys(count: number, seed: number): [number, number][] {
  const random = new Rng(seed);
  return Array.from({ length: count }, () => [random.below(2 ** 32), random.below(2 ** 32)]);
}

describe('LaneFilter', () => {
  it('never calls a key it holds absent, and forgets keys removed', () => {
    const filter = new LaneFilter(1000);
    const held = randomKeys(1000, 1);
    for (const [a, b] of held) filter.add(a, b);
    for (const [a, b] of held) expect(filter.mayHave(a, b)).toBe(true);
    for (const [a, b] of held) filter.remove(a, b);
    for (const [a, b] of held) expect(filter.mayHave(a, b)).toBe(false);
  });

  it('calls most keys it never held absent', () => {
    const filter = new LaneFilter(1000);
    for (const [a, b] of randomKeys(1000, 2)) filter.add(a, b);
    const maybe = randomKeys(10_000, 3).filter(([a, b]) => filter.mayHave(a, b)).length;
    expect(maybe).toBeLessThan(3_000);
  });

  it('is sized for at least the keys asked for, up to its largest size', () => {
    for (const expected of [0, 1, 1000, 5000, 100_000]) expect(new LaneFilter(expected).room).toBeGreaterThanOrEqual(expected);
    expect(new LaneFilter(1000).room).toBeLessThan(4 * 1000);
    expect(new LaneFilter(10 * LANE_FILTER_MAX_ROOM).room).toBe(LANE_FILTER_MAX_ROOM);
  });

  it('is outgrown by more keys than its room until it is the largest size', () => {
    const filter = new LaneFilter(1000);
    expect(filter.outgrownBy(filter.room)).toBe(false);
    expect(filter.outgrownBy(filter.room + 1)).toBe(true);
    expect(new LaneFilter(10 * LANE_FILTER_MAX_ROOM).outgrownBy(100 * LANE_FILTER_MAX_ROOM)).toBe(false);
  });

  it('keeps a key added beside many others with the same counter', () => {
    const filter = new LaneFilter(1);
    // 300 adds of one key saturate its counter; removing 299 must not make the remaining one absent.
    for (let i = 0; i < 300; i++) filter.add(7, 9);
    for (let i = 0; i < 299; i++) filter.remove(7, 9);
    expect(filter.mayHave(7, 9)).toBe(true);
  });
});
