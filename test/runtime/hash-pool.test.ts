import { describe, expect, it } from 'vitest';
import { blockHashes } from '../../src/core/block-hash.js';
import { PromptHashPool } from '../../src/runtime/hash-pool.js';

function prompt(seed: number, length: number): Int32Array {
  const out = new Int32Array(length);
  let x = seed * 2654435761 + 1;
  for (let i = 0; i < length; i++) {
    x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + i) >>> 0;
    out[i] = x % 32000;
  }
  return out;
}

describe('prompt hashing for request batches', () => {
  it('hashes a large batch in the worker pool to exactly the hashes computed in place', async () => {
    // 48 prompts of 4000 tokens: well above the size that goes to the pool, split over several tasks.
    const prompts = Array.from({ length: 48 }, (_, i) => prompt(i, 4000 + i));
    const salts = prompts.map((_, i) => (i % 3 === 0 ? `tenant-${i}` : null));
    const pool = new PromptHashPool(16);
    try {
      const hashed = await pool.hash(prompts, salts);
      expect(hashed).toHaveLength(prompts.length);
      hashed.forEach((hashes, i) => expect(hashes).toEqual(blockHashes(prompts[i], 16, salts[i])));
    } finally {
      await pool.close();
    }
  });

  it('hashes a small batch in place, with the same result', async () => {
    const prompts = [prompt(1, 100), prompt(2, 33)];
    const pool = new PromptHashPool(8);
    try {
      expect(await pool.hash(prompts, [null, 'x'])).toEqual([blockHashes(prompts[0], 8), blockHashes(prompts[1], 8, 'x')]);
    } finally {
      await pool.close();
    }
  });
});
