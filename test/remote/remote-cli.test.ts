import { quietEngineMetrics } from '../support/engine-metrics.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRunArgs, resolveRunConfig, toEngineConfig } from '../../src/cli/run-config.js';
import { RemoteTierStats } from '../../src/remote/remote-stats.js';
import { createMetricsRegistry } from '../../src/prometheus/metrics-registry.js';
import { kvtier } from '../cli-e2e/cli.js';
import { freeLoopbackPort } from '../../src/core/loopback-port.js';

describe('the remote tier on the command line', () => {
  it('passes --remote, --remote-policy, --remote-timeout-ms and --remote-namespace to the engine as config keys', () => {
    const config = parseRunArgs([
      '--remote',
      'redis://127.0.0.1:6380',
      '--remote-policy',
      'write-back',
      '--remote-timeout-ms',
      '40',
      '--remote-namespace',
      'team-a',
    ]);
    const engine = toEngineConfig(resolveRunConfig(config, 0), { offload: true });
    expect(engine).toMatchObject({ remote: 'redis://127.0.0.1:6380', remotePolicy: 'write-back', remoteTimeoutMs: 40, remoteNamespace: 'team-a' });
    expect(toEngineConfig(resolveRunConfig(config, 0), { offload: false }).remote).toBeUndefined();
  });

  it('passes --remote-secret-file and --remote-encrypt to the engine, and refuses a short or missing secret naming the flag', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvtier-secret-'));
    const good = join(dir, 'good');
    const short = join(dir, 'short');
    writeFileSync(good, 'sixteen-or-more-bytes\n');
    writeFileSync(short, 'short\n');
    const config = parseRunArgs(['--remote', 'redis://127.0.0.1:6380', '--remote-secret-file', good, '--remote-encrypt']);
    expect(toEngineConfig(resolveRunConfig(config, 0), { offload: true })).toMatchObject({ remoteSecretFile: good, remoteEncrypt: true });
    const refusal = (...args: string[]) => () => parseRunArgs(['--remote', 'redis://127.0.0.1:6380', ...args]);
    expect(refusal('--remote-secret-file', short)).toThrow('--remote-secret-file: the remote secret has 5 bytes; give at least 16');
    expect(refusal('--remote-secret-file', join(dir, 'none'))).toThrow(`--remote-secret-file: cannot read '${join(dir, 'none')}' (ENOENT)`);
    expect(refusal('--remote-encrypt')).toThrow('--remote-encrypt needs a secret: give --remote-secret-file or set KVTIER_REMOTE_SECRET');
    expect(() => parseRunArgs(['--remote-secret-file', good])).toThrow('--remote-secret-file configures the remote tier: add --remote URL');
  });

  it('exits 2 with one line naming the masked URL when the server is unreachable at start', async () => {
    const port = await freeLoopbackPort();
    const result = await kvtier(['run', '--remote', `redis://alice:s3cret@127.0.0.1:${port}`, '--requests', '2', '--rounds', '1']);
    expect(result.code).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`redis://alice:***@127.0.0.1:${port}`);
    expect(result.stderr + result.stdout).not.toContain('s3cret');
  });

  it('bench remote refuses an empty or malformed --url as bad input: exit 2, one line naming the flag', async () => {
    for (const [url, words] of [['', '--url: expected a redis:// or rediss:// URL, got an empty string'], ['redis://u:50%off@h:1', "--url: 'redis://u:***@h:1': the password has a %"]]) {
      const result = await kvtier(['bench', 'remote', '--url', url]);
      expect(result.code).toBe(2);
      expect(result.stderr.trim().split('\n')).toEqual([expect.stringContaining(`kvtier: ${words}`)]);
      expect(result.stderr).not.toContain('50%off');
    }
  });

  it('refuses remote settings without --remote, and a malformed URL, naming the flag', async () => {
    const policy = await kvtier(['run', '--remote-policy', 'write-back']);
    expect(policy.code).toBe(2);
    expect(policy.stderr).toContain('--remote-policy configures the remote tier: add --remote URL');
    const url = await kvtier(['run', '--remote', 'http://u:pw@host:1']);
    expect(url.code).toBe(2);
    expect(url.stderr).toContain("--remote: 'http://u:***@host:1' has scheme 'http'");
  });
});

describe('remote tier metrics in Prometheus', () => {
  it('expose remote hits, blocks, failures by cause, bytes, lookups and the connection', async () => {
    const stats = new RemoteTierStats();
    stats.lookupAnswered(2, 10, 4);
    stats.lookupFailed(250, true);
    stats.fetchIssued(4);
    stats.fetchSucceeded(3, 48, 3000);
    stats.fetchFailed(1, 'miss');
    stats.writeIssued(5);
    stats.writeFailed(2, 'connection');
    stats.noteConnection({ reconnects: 3, connected: true });
    const base = quietEngineMetrics({
      requests: { added: 1, finished: 1, aborted: 0, failed: 0 },
      tokens: { prompt: 100, output: 1, prefillComputed: 52, recomputed: 0, promptReached: 100 },
      hits: { gpuPrefixTokens: 0, cpuTierTokens: 48 },
    });
    const text = await createMetricsRegistry(() => ({ ...base, remote: stats.snapshot() })).metrics();
    expect(text).toContain('kvtier_hit_tokens_total{tier="remote"} 48');
    expect(text).toContain('kvtier_remote_blocks_total{op="read"} 4');
    expect(text).toContain('kvtier_remote_failed_blocks_total{op="read",cause="miss"} 1');
    expect(text).toContain('kvtier_remote_failed_blocks_total{op="write",cause="connection"} 2');
    expect(text).toContain('kvtier_remote_bytes_total{op="read"} 3000');
    expect(text).toContain('kvtier_remote_lookups_total{outcome="timed_out"} 1');
    expect(text).toContain('kvtier_remote_reconnects_total 3');
    expect(text).toContain('kvtier_remote_connected{rank="scheduler"} 1');
    const without = await createMetricsRegistry(() => base).metrics();
    expect(without).not.toMatch(/kvtier_remote_blocks_total\{/);
  });
});
