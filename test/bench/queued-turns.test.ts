import { describe, expect, it } from 'vitest';
import { parseSweepPolicy, runSweep } from '../../src/bench/sweep.js';
import { traceFile } from '../support/sweep-fixture.js';

/**
 * A conversation's second turn arrives while the engine is busy with
 * one-off prompts queued before it: it waits, and the one-offs' stores
 * overflow the tier meanwhile. At token scale 64 a trace block is 8 tokens
 * (two 4-token blocks).
 */
function returningTurnBehindOneOffs(oneOffs: number): object[] {
  const lines: object[] = [{ timestamp: 0, input_length: 2048, output_length: 64, hash_ids: [1, 2, 3, 4] }];
  let hash = 100;
  for (let i = 0; i < oneOffs; i++) {
    lines.push({ timestamp: 1000, input_length: 2048, output_length: 64, hash_ids: [hash++, hash++, hash++, hash++] });
  }
  lines.push({ timestamp: 1000, input_length: 2560, output_length: 64, hash_ids: [1, 2, 3, 4, hash++] });
  return lines;
}

describe('keeping the blocks queued requests will read', () => {
  it('serves a returning turn from the tier after one-off prompts queued before it overflowed the tier', async () => {
    const result = await runSweep({
      traceFile: traceFile(returningTurnBehindOneOffs(8)),
      maxRequests: 100,
      tokenScale: 64,
      gpuBlocks: 24,
      blockSize: 4,
      offloadFactor: 1,
      cpuBlocks: [12],
      policies: ['lru', 's3fifo', 'lru+queue', 's3fifo+queue'].map(parseSweepPolicy),
    });
    const hits = Object.fromEntries(result.points.map((p) => [p.policy, p.cpuHitTokens]));
    for (const point of result.points) expect(point.verified).toBe(point.requests);
    // The whole first turn (32 tokens, 8 blocks) comes back from the tier only where it was kept.
    expect(hits['lru+queue']).toBe(32);
    expect(hits['s3fifo+queue']).toBe(32);
    // Unprotected, the one-offs' stores take the first turn's tail (its chain is evicted from the tail): only part comes back.
    expect(hits.lru).toBeLessThan(32);
    expect(hits.s3fifo).toBeLessThan(32);
  });
});
