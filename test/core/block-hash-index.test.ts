import { describe, expect, it } from 'vitest';
import { blockHashLane } from '../../src/core/block-hash.js';
import { BlockHashIndex } from '../../src/core/block-hash-index.js';
import { ABSENT } from '../../src/core/lane-hash-table.js';
import { Rng } from '../support/random.js';

/** An index over a slot -> key array, as its owners keep one. */
function indexWithKeys(): { index: BlockHashIndex; keys: (string | undefined)[]; add(key: string): number } {
  const keys: (string | undefined)[] = [];
  const index = new BlockHashIndex((slot) => keys[slot]);
  return {
    index,
    keys,
    add(key) {
      keys.push(key);
      index.add(key, keys.length - 1);
      return keys.length - 1;
    },
  };
}

describe('a block hash index', () => {
  it('finds 16-hex-digit hashes and any other key text', () => {
    const { index, add } = indexWithKeys();
    const hex = add('0123456789abcdef');
    const other = add('block-7');
    expect(index.get('0123456789abcdef')).toBe(hex);
    expect(index.get('block-7')).toBe(other);
    expect(index.get('0123456789abcdee')).toBe(ABSENT);
    expect(index.size).toBe(2);
  });

  it('keeps two different keys with the same lanes apart, and deletes either', () => {
    const { index, add } = indexWithKeys();
    // Hex digits parse case-insensitively, so these two strings share both lanes.
    const lower = 'abcdef0123456789';
    const upper = 'ABCDEF0123456789';
    expect(blockHashLane(upper, 0)).toBe(blockHashLane(lower, 0));
    expect(blockHashLane(upper, 1)).toBe(blockHashLane(lower, 1));
    const first = add(lower);
    const second = add(upper);
    expect([index.get(lower), index.get(upper)]).toEqual([first, second]);
    expect(index.delete(lower)).toBe(true);
    expect([index.get(lower), index.get(upper)]).toEqual([ABSENT, second]);
    expect(index.delete(upper)).toBe(true);
    expect(index.delete(upper)).toBe(false);
    expect(index.size).toBe(0);
  });

  it('agrees with a Map through random adds and deletes', () => {
    const rng = new Rng(8);
    const { index, keys, add } = indexWithKeys();
    const reference = new Map<string, number>();
    for (let i = 0; i < 5000; i++) {
      const key = rng.below(300).toString(16).padStart(16, '0');
      if (reference.has(key)) {
        if (rng.next() < 0.5) {
          expect(index.delete(key)).toBe(true);
          keys[reference.get(key) as number] = undefined;
          reference.delete(key);
        }
      } else {
        reference.set(key, add(key));
      }
      expect(index.get(key)).toBe(reference.get(key) ?? ABSENT);
      expect(index.size).toBe(reference.size);
    }
  });
});
