import { quietEngineMetrics } from '../support/engine-metrics.js';
import { describe, expect, it } from 'vitest';
import { freeLoopbackPort } from '../../src/core/loopback-port.js';
import { openDevice } from '../../src/device/device.js';
import { RankRemoteTier } from '../../src/remote/rank-remote.js';
import { remoteNamespace } from '../../src/remote/remote-keys.js';
import { remoteReportRows } from '../../src/remote/remote-report.js';
import type { RemoteTierMetrics } from '../../src/remote/remote-stats.js';
import { RemoteTierStats } from '../../src/remote/remote-stats.js';
import { createMetricsRegistry } from '../../src/prometheus/metrics-registry.js';
import { haveRedis, noteRedisSkip, redisServersPerTest } from '../support/redis-server.js';
import { TINY_NO_COMPUTE } from '../support/tiny.js';
import { asRequests, expectAllCorrect, prompts, remoteConfig, runEngine } from './remote-helpers.js';
import { kvGeometry } from '../../src/core/kv-geometry.js';

/**
 * Each rank moves its own shards over its own connection, so the scheduler's
 * connection says nothing of theirs: a rank that cannot reach the server, or
 * whose writes all fail, is a warning line of the report and
 * kvtier_remote_connected{rank} 0.
 */

noteRedisSkip('the remote rank health tests');

const server = redisServersPerTest();

const warnings = (remote: RemoteTierMetrics) => remoteReportRows(remote, 1).filter(([label]) => label === 'remote warning').map(([, text]) => text);

/** Engine metrics with nothing in them but the remote tier's. */
const BASE = quietEngineMetrics();

async function connectedGauge(remote: RemoteTierMetrics): Promise<string[]> {
  const text = await createMetricsRegistry(() => ({ ...BASE, remote })).metrics();
  return text.split('\n').filter((line) => line.startsWith('kvtier_remote_connected{'));
}

describe.skipIf(!haveRedis)("the ranks' standing with the remote tier", () => {
  it('healthy ranks give no warning and are connected', async () => {
    const s = await server();
    const run = await runEngine(remoteConfig(s.url), asRequests(prompts(9_500, 2), 'a'));
    expect(run.remote.ranks.map((h) => [h.rank, h.connected, h.wroteAny, h.writeFailed])).toEqual([[0, true, true, false], [1, true, true, false]]);
    expect(warnings(run.remote)).toEqual([]);
    expect(await connectedGauge(run.remote)).toEqual([
      'kvtier_remote_connected{rank="scheduler"} 1',
      'kvtier_remote_connected{rank="0"} 1',
      'kvtier_remote_connected{rank="1"} 1',
    ]);
  }, 60_000);

  it('ranks whose every write the server refuses (an ACL without SET) are each a warning line and connected 0, and outputs stay correct', async () => {
    const s = await server();
    s.cli('acl', 'setuser', 'reader', 'on', '>pw', '~*', '&*', '+@all', '-set');
    const run = await runEngine(remoteConfig(`redis://reader:pw@127.0.0.1:${s.port}`), asRequests(prompts(9_600, 2), 'a'));
    expectAllCorrect(run, 2);
    expect(run.remote.writes.failed).toBeGreaterThan(0);
    expect(warnings(run.remote)).toEqual([
      expect.stringMatching(/^rank 0: every write failed: NOPERM/),
      expect.stringMatching(/^rank 1: every write failed: NOPERM/),
    ]);
    expect(await connectedGauge(run.remote)).toEqual([
      'kvtier_remote_connected{rank="scheduler"} 1',
      'kvtier_remote_connected{rank="0"} 0',
      'kvtier_remote_connected{rank="1"} 0',
    ]);
  }, 60_000);

  it('a rank that cannot reach the server reports itself not connected, with the reason, once', async () => {
    const device = await openDevice({
      backend: 'host', rank: 0, deviceIndex: 0, geometry: kvGeometry({ model: TINY_NO_COMPUTE, tp: 1, blockSize: 16, layout: 'per-layer' }),
      numGpuBlocks: 1, numCpuBlocks: 2,
    });
    const ns = remoteNamespace({ namespace: 'health', model: TINY_NO_COMPUTE, layout: 'per-layer', blockSize: 16, offloadFactor: 1, tp: 1 });
    const tier = new RankRemoteTier(device, 0, 1, {
      url: `redis://127.0.0.1:${await freeLoopbackPort()}`,
      cluster: false,
      timeoutMs: 200,
      namespace: ns.name,
      namespaceDigestHex: ns.digest.toString('hex'),
      blockTokens: 16,
      maxInFlightWrites: 2,
      retry: { writeAttempts: 1, backoffMs: 0 },
    });
    try {
      await tier.start();
      const health = tier.healthChange();
      expect(health).toMatchObject({ rank: 0, connected: false, wroteAny: false });
      expect(health?.lastError).toMatch(/ECONNREFUSED/);
      expect(tier.healthChange()).toBeNull();
      const stats = new RemoteTierStats();
      stats.noteConnection({ reconnects: 0, connected: true });
      stats.noteRankHealth(health!);
      expect(warnings(stats.snapshot())).toEqual([expect.stringMatching(/^rank 0 is not connected to the server: .*ECONNREFUSED/)]);
      expect(await connectedGauge(stats.snapshot())).toContain('kvtier_remote_connected{rank="0"} 0');
    } finally {
      await tier.close();
      device.close();
    }
  }, 60_000);
});
