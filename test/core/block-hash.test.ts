import { describe, expect, it } from 'vitest';
import { blockHashes, blockHashLane, extendBlockHashes, formatBlockHash, hashBlock } from '../../src/core/block-hash.js';

describe('chained block hashes', () => {
  const tokens = Array.from({ length: 64 }, (_, i) => (i * 37) % 1000);

  it('hash only full blocks, 16 hex digits each', () => {
    const hashes = blockHashes(tokens.slice(0, 50), 16);
    expect(hashes).toHaveLength(3);
    for (const h of hashes) expect(h).toMatch(/^[0-9a-f]{16}$/);
  });

  it('are equal for equal prefixes and differ after the first differing block', () => {
    const other = tokens.slice();
    other[40] = 999;
    const a = blockHashes(tokens, 16);
    const b = blockHashes(other, 16);
    expect(b.slice(0, 2)).toEqual(a.slice(0, 2));
    expect(b[2]).not.toBe(a[2]);
    // Chaining: a later block differs even though its own tokens are equal.
    expect(b[3]).not.toBe(a[3]);
  });

  it('depend on the extra key (cache salt)', () => {
    expect(blockHashes(tokens, 16, 'tenant-a')[0]).not.toBe(blockHashes(tokens, 16)[0]);
    expect(blockHashes(tokens, 16, 'tenant-a')).toEqual(blockHashes(tokens, 16, 'tenant-a'));
  });

  it('are extended incrementally, one block at a time, to the same values', () => {
    const hashes: string[] = [];
    for (let n = 0; n <= tokens.length; n += 5) extendBlockHashes(hashes, tokens, n, 16);
    extendBlockHashes(hashes, tokens, tokens.length, 16);
    expect(hashes).toEqual(blockHashes(tokens, 16));
  });

  it('are stable across processes (no random seeds): a fixed input has a fixed hash', () => {
    expect(hashBlock(null, [1, 2, 3, 4], 0, 4)).toBe(hashBlock(null, Int32Array.from([1, 2, 3, 4]), 0, 4));
    expect(hashBlock(null, [1, 2, 3, 4], 0, 4)).toMatchInlineSnapshot(`"a9cccf004da3919d"`);
  });

  it('keep their pinned value when chained on a parent and salted', () => {
    const parent = hashBlock(null, [7, 8, 9], 0, 3);
    expect(hashBlock(parent, [1, 2, 3, 4, 5], 1, 5, 'tenant')).toMatchInlineSnapshot(`"d83f0fdbdbddca3e"`);
  });

  it('read a parent written in upper case as the same lanes', () => {
    const parent = hashBlock(null, [7, 8, 9], 0, 3);
    expect(hashBlock(parent.toUpperCase(), tokens, 0, 16)).toBe(hashBlock(parent, tokens, 0, 16));
  });

  it('continue a chain from a parent string exactly as extending the list does', () => {
    const hashes = blockHashes(tokens, 8);
    for (let i = 1; i < hashes.length; i++) {
      expect(hashBlock(hashes[i - 1], tokens, i * 8, (i + 1) * 8)).toBe(hashes[i]);
    }
  });

  it("gives every key its own lanes however the lanes of different keys are asked for in turn", () => {
    const keys = [...blockHashes(Array.from({ length: 64 }, (_, i) => i), 8), 'not-hex', 'p:1', 'not-hex'];
    const alone = keys.map((key) => [blockHashLane(`${key}`, 0), blockHashLane(`${key}`, 1)]);
    // Interleaved: lane 1 of one key right after lane 0 of another, and a key asked twice in a row.
    for (let i = 0; i < keys.length; i++) {
      const next = keys[(i + 1) % keys.length];
      expect(blockHashLane(keys[i], 0)).toBe(alone[i][0]);
      expect(blockHashLane(next, 1)).toBe(alone[(i + 1) % keys.length][1]);
      expect(blockHashLane(keys[i], 1)).toBe(alone[i][1]);
      expect(blockHashLane(keys[i], 1)).toBe(alone[i][1]);
    }
    // A 16-hex-digit key's lanes are its value.
    expect(formatBlockHash(alone[0][0], alone[0][1])).toBe(keys[0]);
  });
});
