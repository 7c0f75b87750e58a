import { describe, expect, it } from 'vitest';
import { runRemoteBench } from '../../src/bench/remote.js';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { haveRedis, noteRedisSkip } from '../support/redis-server.js';

/** `bench remote` measures every value protection in one run, each through the tier's own write and read path. */

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
