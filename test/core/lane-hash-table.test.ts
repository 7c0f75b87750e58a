import { describe, expect, it } from 'vitest';
import { blockHashes, blockHashLane, formatBlockHash } from '../../src/core/block-hash.js';
import { ABSENT, LaneHashTable } from '../../src/core/lane-hash-table.js';
import { Rng } from '../support/random.js';

/** Every entry of the table, as "a:b=value" sorted. */
function entriesOf(table: LaneHashTable): string[] {
  const out: string[] = [];
  table.forEach((a, b, value) => out.push(`${a}:${b}=${value}`));
  return out.sort();
}

/** The same entries of a reference Map keyed by "a:b". */
function entriesOfMap(map: Map<string, number>): string[] {
  return [...map].map(([key, value]) => `${key}=${value}`).sort();
}

describe('a lane hash table', () => {
  it('finds what was stored and answers ABSENT for anything else', () => {
    const table = new LaneHashTable();
    table.set(1, 2, 10);
    table.set(2, 1, 20);
    expect(table.get(1, 2)).toBe(10);
    expect(table.get(2, 1)).toBe(20);
    expect(table.get(1, 1)).toBe(ABSENT);
    expect(table.has(2, 1)).toBe(true);
    expect(table.size).toBe(2);
  });

  it('replaces the value of a key stored again without counting it twice', () => {
    const table = new LaneHashTable();
    table.set(7, 7, 1);
    table.set(7, 7, 2);
    expect(table.get(7, 7)).toBe(2);
    expect(table.size).toBe(1);
  });

  it('stores under an absent key only, leaving a present one as it was', () => {
    const table = new LaneHashTable();
    expect(table.setIfAbsent(3, 4, 1)).toBe(true);
    expect(table.setIfAbsent(3, 4, 2)).toBe(false);
    expect(table.get(3, 4)).toBe(1);
    expect(table.size).toBe(1);
  });

  it('keeps keys apart that differ only in one lane, including full uint32 lanes', () => {
    const table = new LaneHashTable();
    table.set(0xffffffff, 0, 1);
    table.set(0, 0xffffffff, 2);
    table.set(0xffffffff, 0xffffffff, 3);
    table.set(0, 0, 4);
    expect([table.get(0xffffffff, 0), table.get(0, 0xffffffff), table.get(0xffffffff, 0xffffffff), table.get(0, 0)]).toEqual([
      1, 2, 3, 4,
    ]);
    // Negative int32 views of the same lanes name the same keys.
    expect(table.get(-1, -1)).toBe(3);
  });

  it('finds every key of a colliding probe run after deleting from its middle', () => {
    const table = new LaneHashTable();
    // Lane b 0 and lane a a multiple of the capacity: every key has home slot 0.
    const keys = [0, 16, 32, 48, 64].map((a) => a * 1024);
    keys.forEach((a, i) => table.set(a, 0, i));
    expect(table.delete(keys[1], 0)).toBe(true);
    expect(table.delete(keys[1], 0)).toBe(false);
    expect(keys.map((a) => table.get(a, 0))).toEqual([0, ABSENT, 2, 3, 4]);
    expect(table.delete(keys[0], 0)).toBe(true);
    expect(keys.map((a) => table.get(a, 0))).toEqual([ABSENT, ABSENT, 2, 3, 4]);
    expect(table.size).toBe(3);
  });

  it('grows past its initial capacity and keeps every entry', () => {
    const table = new LaneHashTable();
    const initial = table.capacity;
    for (let i = 0; i < 1000; i++) table.set(i, i * 3, i);
    expect(table.capacity).toBeGreaterThan(initial);
    expect(table.size).toBe(1000);
    for (let i = 0; i < 1000; i++) expect(table.get(i, i * 3)).toBe(i);
  });

  it('is empty after clear and accepts new entries', () => {
    const table = new LaneHashTable(4);
    table.set(1, 1, 1);
    table.clear();
    expect(table.size).toBe(0);
    expect(table.get(1, 1)).toBe(ABSENT);
    table.set(1, 1, 5);
    expect(table.get(1, 1)).toBe(5);
  });

  it('refuses values that are not int32 >= 0', () => {
    const table = new LaneHashTable();
    expect(() => table.set(1, 1, -1)).toThrow(/int32 >= 0, got -1/);
    expect(() => table.set(1, 1, 2 ** 31)).toThrow(RangeError);
    expect(table.size).toBe(0);
  });

  it('agrees with a Map through random sets, replacements and deletes over a small key space', () => {
    const rng = new Rng(15);
    const table = new LaneHashTable();
    const reference = new Map<string, number>();
    // A small key space makes deletes hit and probe runs collide; the high bits exercise full lanes.
    const lane = (): number => (rng.below(64) * 0x04000001) >>> 0;
    for (let i = 0; i < 20000; i++) {
      const a = lane();
      const b = lane();
      const key = `${a}:${b}`;
      if (rng.next() < 0.45) {
        expect(table.delete(a, b)).toBe(reference.delete(key));
      } else {
        const value = rng.below(1 << 30);
        table.set(a, b, value);
        reference.set(key, value);
      }
      expect(table.get(a, b)).toBe(reference.get(key) ?? ABSENT);
      expect(table.size).toBe(reference.size);
    }
    expect(entriesOf(table)).toEqual(entriesOfMap(reference));
  });
});

describe('the lanes of a block hash', () => {
  it('are the two 8-digit halves of its 16 hex digits, and format back to the same text', () => {
    for (const hash of blockHashes(Array.from({ length: 64 }, (_, i) => i), 16)) {
      const a = blockHashLane(hash, 0);
      const b = blockHashLane(hash, 1);
      expect(a).toBe(parseInt(hash.slice(0, 8), 16));
      expect(b).toBe(parseInt(hash.slice(8), 16));
      expect(formatBlockHash(a, b)).toBe(hash);
    }
    expect(blockHashLane('ffffffff00000001', 0)).toBe(0xffffffff);
    expect(blockHashLane('ffffffff00000001', 1)).toBe(1);
  });

  it('fingerprint any other string, differently per lane', () => {
    const a = blockHashLane('h12', 0);
    const b = blockHashLane('h12', 1);
    expect(a).toBe(blockHashLane('h12', 0));
    expect(a).not.toBe(b);
    expect(blockHashLane('h13', 0)).not.toBe(a);
    expect(Number.isInteger(a) && a >= 0 && a <= 0xffffffff).toBe(true);
  });
});
