import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  blockHashes,
  blockHashKey,
  blockHashLane,
  DEFAULT_BLOCK_HASH_KEY,
  extendBlockHashes,
  formatBlockHash,
  hashBlock,
  knownHashWords,
  parseBlockHashKey,
  setBlockHashKey,
  sipHashWords,
  type BlockHashKey,
} from '../../src/core/block-hash.js';

/** The key of the SipHash reference vectors: bytes 00..0f. */
const TEST_KEY: BlockHashKey = [0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c];

const BUILT = pathToFileURL(join(resolve(import.meta.dirname, '../..'), 'dist', 'src', 'core', 'block-hash.js')).href;

/** Runs `body` with block hashes under `key`, then puts the process's key back. */
function withKey<T>(key: BlockHashKey, body: () => T): T {
  const before = blockHashKey();
  setBlockHashKey(key);
  try {
    return body();
  } finally {
    setBlockHashKey(before);
  }
}

describe('the keyed hash under block hashes', () => {
  it('is SipHash-1-3: the reference vectors for key 00..0f and messages 00.., of 0, 8 and 16 bytes', () => {
    withKey(TEST_KEY, () => {
      expect(sipHashWords([])).toBe('abac0158050fc4dc');
      expect(sipHashWords([0x03020100, 0x07060504])).toBe('369095118d299a8e');
      expect(sipHashWords([0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c])).toBe('cc4fdd1a7d908b66');
    });
  });

  it('refuses a key that is not four unsigned 32-bit words, keeping the one it had', () => {
    const before = blockHashKey();
    expect(() => setBlockHashKey([1, 2, 3] as unknown as BlockHashKey)).toThrow(/four unsigned 32-bit integers/);
    expect(() => setBlockHashKey([1, 2, 3, 2 ** 32])).toThrow(/four unsigned 32-bit integers/);
    expect(blockHashKey()).toEqual(before);
  });
});

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

  it('are stable within the process: a fixed input has a fixed hash however its tokens are held', () => {
    expect(hashBlock(null, [1, 2, 3, 4], 0, 4)).toBe(hashBlock(null, Int32Array.from([1, 2, 3, 4]), 0, 4));
    expect(hashBlock(null, [1, 2, 3, 4], 0, 4)).toBe(hashBlock(null, [1, 2, 3, 4], 0, 4));
  });

  it('keep their pinned value under a fixed key, chained on a parent and salted', () => {
    withKey(TEST_KEY, () => {
      // SipHash-1-3 of the words (4 tokens, no flags), (1, 2), (3, 4), as little-endian uint32s.
      expect(hashBlock(null, [1, 2, 3, 4], 0, 4)).toMatchInlineSnapshot(`"d816a946d542b767"`);
      const parent = hashBlock(null, [7, 8, 9], 0, 3);
      expect(hashBlock(parent, [1, 2, 3, 4, 5], 1, 5, 'tenant')).toMatchInlineSnapshot(`"a00a4b6733382565"`);
    });
  });

  it('change with the key: without it, no one can compute a block hash or search for a collision', () => {
    const under = (key: BlockHashKey) => withKey(key, () => blockHashes(tokens, 16, 'tenant-a'));
    const a = under(TEST_KEY);
    const b = under([1, 0, 0, 0]);
    expect(a).toEqual(under(TEST_KEY));
    a.forEach((hash, i) => expect(hash).not.toBe(b[i]));
  });

  it('treat an empty salt as no salt, and never let salt characters stand in for tokens', () => {
    expect(blockHashes(tokens, 16, '')).toEqual(blockHashes(tokens, 16, null));
    // "ab" packs into one 32-bit word as 0x00620061: as a token it is a different message.
    expect(hashBlock(null, [1, 2], 0, 2, 'ab')).not.toBe(hashBlock(null, [1, 2, 0x00620061], 0, 3));
    expect(hashBlock(null, [1, 2], 0, 2, 'ab')).not.toBe(hashBlock(null, [1, 2], 0, 2, 'ab\0'));
  });

  it('agree across processes under the public key, and differ under a secret one from the environment', () => {
    const hashInChild = (env: Record<string, string>) =>
      execFileSync(process.execPath, ['--input-type=module', '-e', `const m = await import(${JSON.stringify(BUILT)}); process.stdout.write(m.hashBlock(null, [1, 2, 3, 4], 0, 4));`], {
        encoding: 'utf8',
        env: { ...process.env, KVTIER_BLOCK_HASH_KEY: '', ...env },
      });
    const first = hashInChild({});
    expect(first).toMatch(/^[0-9a-f]{16}$/);
    expect(hashInChild({})).toBe(first);
    expect(withKey(DEFAULT_BLOCK_HASH_KEY, () => hashBlock(null, [1, 2, 3, 4], 0, 4))).toBe(first);
    const secret = '000102030405060708090a0b0c0d0e0f';
    const keyed = hashInChild({ KVTIER_BLOCK_HASH_KEY: secret });
    expect(keyed).not.toBe(first);
    expect(hashInChild({ KVTIER_BLOCK_HASH_KEY: secret })).toBe(keyed);
    expect(withKey(parseBlockHashKey(secret) as BlockHashKey, () => hashBlock(null, [1, 2, 3, 4], 0, 4))).toBe(keyed);
  });

  it('read a secret key as 32 hex digits and name the variable when it is anything else', () => {
    expect(parseBlockHashKey(undefined)).toBeNull();
    expect(parseBlockHashKey('')).toBeNull();
    expect(parseBlockHashKey('000102030405060708090a0b0c0d0e0f')).toEqual([0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c]);
    expect(parseBlockHashKey('0102')).toMatch(/KVTIER_BLOCK_HASH_KEY: expected 32 hex digits/);
    expect(parseBlockHashKey('zz0102030405060708090a0b0c0d0e0f')).toMatch(/KVTIER_BLOCK_HASH_KEY/);
  });

  it('refuse to configure an engine while the environment holds a malformed secret key', () => {
    const configModule = pathToFileURL(join(resolve(import.meta.dirname, '../..'), 'dist', 'src', 'runtime', 'engine-config.js')).href;
    const out = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', `const m = await import(${JSON.stringify(configModule)}); try { m.resolveEngineConfig({}); process.stdout.write('accepted'); } catch (e) { process.stdout.write(e.message); }`],
      { encoding: 'utf8', env: { ...process.env, KVTIER_BLOCK_HASH_KEY: 'not-a-key' } },
    );
    expect(out).toMatch(/^invalid environment: KVTIER_BLOCK_HASH_KEY: expected 32 hex digits/);
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

  describe('words of recently made hashes', () => {
    const wordsOf = (hash: string): [number, number] | null => {
      const out = new Int32Array(2);
      return knownHashWords(hash, out) ? [out[0] >>> 0, out[1] >>> 0] : null;
    };
    const valueOf = (hash: string): [number, number] => [parseInt(hash.slice(0, 8), 16), parseInt(hash.slice(8), 16)];

    it('are known without a parse for every hash the hasher just made, and equal its value', () => {
      const made = blockHashes(Array.from({ length: 64 }, (_, i) => 7000 + i), 4);
      made.push(hashBlock(made[made.length - 1], [1, 2, 3, 4], 0, 4, 'salt'));
      for (const hash of made) expect(wordsOf(hash)).toEqual(valueOf(hash));
      // The same text in a string of its own is the same hash.
      expect(wordsOf(made[3].split('').join(''))).toEqual(valueOf(made[3]));
    });

    it('are not known for a hash no hasher made here, nor for a text that is not a hash', () => {
      // Lanes looked up last are known (the tables just parsed them): look up something else first.
      blockHashLane('block-0000000001', 0);
      expect(wordsOf('0123456789abcdef')).toBeNull();
      expect(wordsOf('0123456789abcdeg')).toBeNull();
      expect(wordsOf('abc')).toBeNull();
    });

    it('forget a hash once a later hash takes its slot, and still know the later one', () => {
      blockHashLane('block-0000000001', 0);
      const bySlot = new Map<number, string>();
      let parent: string | null = null;
      for (let i = 0; ; i++) {
        const hash = hashBlock(parent, [i, i + 1], 0, 2);
        parent = hash;
        const slot = valueOf(hash)[1] & 0x3fff;
        const earlier = bySlot.get(slot);
        if (earlier !== undefined && earlier !== hash) {
          expect(wordsOf(earlier)).toBeNull();
          expect(wordsOf(hash)).toEqual(valueOf(hash));
          break;
        }
        bySlot.set(slot, hash);
      }
    });
  });
});
