import { describe, expect, it } from 'vitest';
import { runRemoteBench } from '../../src/bench/remote.js';
import { runShareBench } from '../../src/bench/share.js';
import { scratchFile } from '../cli-e2e/cli.js';
import { redisServersPerTest } from '../support/redis-server.js';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { haveRedis, noteRedisSkip } from '../support/redis-server.js';

/**
 * `bench remote` measures every value protection in one run, each through the
 * tier's own write and read path; `bench share` leaves nothing on a server it
 * was pointed at.
 */

const server = redisServersPerTest();

noteRedisSkip('the remote bench test');

describe.skipIf(!haveRedis)('bench remote', () => {
  it('gives a write and a read row for each protection asked, each job through the tier (a failed job fails the bench)', async () => {
    const rows = await runRemoteBench({
      backend: 'host',
      url: null,
      models: [MODEL_PRESETS.tiny],
      blockTokens: [16],
      totalBytes: 256 * 1024,
      jobBlocks: 8,
      repeats: 1,
      auth: ['none', 'mac', 'encrypt'],
    });
    expect(rows.map((r) => `${r.auth} ${r.op}`)).toEqual(['none write', 'none read', 'mac write', 'mac read', 'encrypt write', 'encrypt read']);
    for (const row of rows) {
      expect(row.gbps).toBeGreaterThan(0);
      expect(row.limitGbps).toBeGreaterThan(0);
    }
  }, 60_000);
});

describe.skipIf(!haveRedis)('bench share', () => {
  it('deletes what its engines wrote from a server given with --url', async () => {
    const s = await server();
    const lines = Array.from({ length: 8 }, (_, i) => JSON.stringify({ timestamp: i, input_length: 1536, output_length: 4, hash_ids: [10 * (i % 4), 10 * (i % 4) + 1, 10 * (i % 4) + 2] }));
    const rows = await runShareBench({
      backend: 'host', traceFile: scratchFile('trace.jsonl', `${lines.join('\n')}\n`), maxRequests: 8, tokenScale: 32, model: 'tiny', tp: 2,
      blockSize: 16, gpuBlocks: 64, cpuBlocks: 64, url: s.url, timeoutMs: 500,
    });
    expect(rows[1].remoteHitTokens).toBeGreaterThan(0);
    expect(s.cli('dbsize').trim()).toBe('0');
  }, 60_000);
});
