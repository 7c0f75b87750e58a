import { kvGeometry } from '../../src/core/kv-geometry.js';
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { openDevice } from '../../src/device/device.js';
import type { Device } from '../../src/device/types.js';
import { parseFaultPlan } from '../../src/faults/plan.js';
import type { RemoteBlockRef, RemoteJobResult } from '../../src/protocol/remote-jobs.js';
import { RankRemoteTier } from '../../src/remote/rank-remote.js';
import { RemoteFaults } from '../../src/remote/remote-faults.js';
import { remoteNamespace, shardKey, type RemoteNamespace } from '../../src/remote/remote-keys.js';
import type { RemoteTierMetrics } from '../../src/remote/remote-stats.js';
import { RemoteOperationError } from '../../src/remote/remote-store.js';
import { retryDelayMs, RetryWaits, writeWithRetries } from '../../src/remote/write-retry.js';
import { parseRunArgs } from '../../src/cli/run-config.js';
import { resolveEngineConfig } from '../../src/runtime/engine-config.js';
import { createMetricsRegistry } from '../../src/prometheus/metrics-registry.js';
import { quietEngineMetrics } from '../support/engine-metrics.js';
import { haveRedis, noteRedisSkip, startRedis, type RedisServer } from '../support/redis-server.js';
import { TINY_NO_COMPUTE } from '../support/tiny.js';
import { asRequests, expectAllCorrect, prompts, remoteConfig, runEngine } from './remote-helpers.js';

/**
 * A remote write that fails transiently is sent again after a backoff, up to
 * its tries, in the background: one that failed once lands on a retry, one
 * that keeps failing is given up and counted, one the server refuses is not
 * retried, and none is sent again once shutdown began.
 */

noteRedisSkip('the remote write retry tests');

const BLOCK_TOKENS = 16;
/** A backoff no test waits for: a retry after it would mean shutdown waited, or the write was tried again. */
const NEVER_MS = 600_000;

const servers: RedisServer[] = [];
const opened: { tier: RankRemoteTier; device: Device }[] = [];
afterEach(async () => {
  for (const { tier, device } of opened.splice(0)) {
    await tier.close();
    device.close();
  }
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function server(): Promise<RedisServer> {
  const s = await startRedis();
  servers.push(s);
  return s;
}

/** Injected write failures with probability `p` on rank 0, rolled per try. */
function injected(p: number, seed = 5): RemoteFaults {
  return new RemoteFaults(parseFaultPlan(`remote-fail:rank=0,p=${p}`).rules, seed, 0);
}

interface OpenTier {
  readonly tier: RankRemoteTier;
  readonly ns: RemoteNamespace;
  readonly device: Device;
}

async function openTier(url: string, retry: { writeAttempts: number; backoffMs: number }, faults: RemoteFaults | null = null): Promise<OpenTier> {
  const device = await openDevice({
    backend: 'host', rank: 0, deviceIndex: 0,
    geometry: kvGeometry({ model: TINY_NO_COMPUTE, tp: 1, blockSize: BLOCK_TOKENS, layout: 'per-layer', offloadFactor: 1 }),
    numGpuBlocks: 1, numCpuBlocks: 8,
  });
  const ns = remoteNamespace({ namespace: 'retry-test', model: TINY_NO_COMPUTE, layout: 'per-layer', blockSize: BLOCK_TOKENS, offloadFactor: 1, tp: 1 });
  const tier = new RankRemoteTier(
    device, 0, 1,
    { url, cluster: false, timeoutMs: 1000, namespace: ns.name, namespaceDigestHex: ns.digest.toString('hex'), blockTokens: BLOCK_TOKENS, maxInFlightWrites: 8, retry },
    faults,
  );
  opened.push({ tier, device });
  await tier.start();
  return { tier, ns, device };
}

function block(tag: string, cpuBlockId: number): RemoteBlockRef {
  return { digestHex: createHash('sha256').update(tag).digest('hex'), cpuBlockId };
}

/** Starts one write job and waits until the tier reports it (it keeps retrying meanwhile, off this loop). */
async function writeAndSettle(tier: RankRemoteTier, jobId: number, blocks: RemoteBlockRef[]): Promise<RemoteJobResult> {
  tier.startStep({ writes: [{ jobId, blocks }], fetches: [] });
  for (;;) {
    const [result] = tier.collect();
    if (result !== undefined) return result;
    await tier.waitForProgress(1_000);
  }
}

/** A job id whose first try the faults fail and whose first retry they let through. */
function jobFailingOnce(): number {
  const probe = injected(0.5);
  for (let job = 1; ; job++) {
    if (probe.failureAt(0, job, 0) !== null && probe.failureAt(0, job, 1) === null) return job;
  }
}

describe('retry settings', () => {
  it.each([
    [{ remoteWriteAttempts: 0 }, 'remoteWriteAttempts: invalid value 0: expected a positive integer'],
    [{ remoteWriteAttempts: 21 }, 'remoteWriteAttempts: invalid value 21: expected a positive integer up to 20'],
    [{ remoteWriteAttempts: '3' }, 'remoteWriteAttempts: invalid value "3": expected a positive integer'],
    [{ remoteRetryBackoffMs: -1 }, 'remoteRetryBackoffMs: invalid value -1: expected an integer >= 0'],
    [{ remoteRetryBackoffMs: 2.5 }, 'remoteRetryBackoffMs: invalid value 2.5: expected an integer >= 0'],
  ])('%o is refused naming the key', (bad, message) => {
    expect(() => resolveEngineConfig({ cpuBlocks: 8, remote: 'redis://127.0.0.1:6379', ...bad } as never)).toThrow(`invalid engine config: ${message}`);
  });

  it.each([
    [['--remote', 'redis://127.0.0.1:6379', '--remote-write-attempts', '0'], '--remote-write-attempts: invalid value "0": expected a positive integer'],
    [['--remote', 'redis://127.0.0.1:6379', '--remote-retry-backoff-ms', 'soon'], '--remote-retry-backoff-ms: invalid value "soon"'],
    [['--remote-write-attempts', '5'], '--remote-write-attempts configures the remote tier: add --remote URL'],
  ])('the flags %j are refused naming the flag', (args, message) => {
    expect(() => parseRunArgs(args)).toThrow(message);
  });

  it('default to 3 tries and a 100 ms first backoff', () => {
    expect(resolveEngineConfig({ cpuBlocks: 8, remote: 'redis://127.0.0.1:6379' }).remote?.retry).toEqual({ writeAttempts: 3, backoffMs: 100 });
  });
});

describe('retry backoff', () => {
  it('doubles from the configured wait and stops growing at 30 s', () => {
    const settings = { writeAttempts: 20, backoffMs: 100 };
    expect([1, 2, 3, 4].map((r) => retryDelayMs(settings, r))).toEqual([100, 200, 400, 800]);
    expect(retryDelayMs(settings, 19)).toBe(30_000);
    expect(retryDelayMs({ writeAttempts: 3, backoffMs: 0 }, 5)).toBe(0);
  });
});

describe('writes retried on the scheduler side (block manifests)', () => {
  /** A write that fails with `error` the first `failures.get(item)` times it is called for an item, and counts its calls. */
  function flaky(failures: Map<string, number>, error: () => Error) {
    const calls = new Map<string, number>();
    const write = async (item: string): Promise<void> => {
      const n = (calls.get(item) ?? 0) + 1;
      calls.set(item, n);
      if (n <= (failures.get(item) ?? 0)) throw error();
    };
    return { write, calls };
  }
  const lost = () => new RemoteOperationError('connection', 'Connection is closed.');

  it('an item that failed once is written on its retry and counted as retried', async () => {
    const { write, calls } = flaky(new Map([['b', 1]]), lost);
    const outcome = await writeWithRetries(['a', 'b', 'c'], write, { writeAttempts: 3, backoffMs: 0 }, new RetryWaits());
    expect(outcome).toEqual({ written: 3, retried: 1, failed: 0 });
    expect([...calls]).toEqual([['a', 1], ['b', 2], ['c', 1]]);
  });

  it('an item that keeps failing is tried the configured number of times, then counted as failed', async () => {
    const { write, calls } = flaky(new Map([['a', 99]]), lost);
    const outcome = await writeWithRetries(['a'], write, { writeAttempts: 4, backoffMs: 0 }, new RetryWaits());
    expect(outcome).toEqual({ written: 0, retried: 3, failed: 1 });
    expect(calls.get('a')).toBe(4);
  });

  it('a refusal (NOPERM) is not retried', async () => {
    const { write, calls } = flaky(new Map([['a', 1]]), () => new RemoteOperationError('server', "NOPERM User reader has no permissions to run the 'set' command"));
    expect(await writeWithRetries(['a'], write, { writeAttempts: 4, backoffMs: 0 }, new RetryWaits())).toEqual({ written: 0, retried: 0, failed: 1 });
    expect(calls.get('a')).toBe(1);
  });

  it('shutdown cuts a retry short: the waiting item fails at once and is not written again', async () => {
    const { write, calls } = flaky(new Map([['a', 1]]), lost);
    const waits = new RetryWaits();
    const outcome = writeWithRetries(['a'], write, { writeAttempts: 5, backoffMs: NEVER_MS }, waits);
    while (waits.waiting === 0) await new Promise((resolve) => setImmediate(resolve));
    waits.cancelAll();
    expect(await outcome).toEqual({ written: 0, retried: 0, failed: 1 });
    expect(calls.get('a')).toBe(1);
  });
});

describe.skipIf(!haveRedis)('a rank retrying its remote writes', () => {
  it('a write whose first try failed lands on its retry: the server holds the shard and the job reports one retry', async () => {
    const s = await server();
    const faults = injected(0.5);
    const { tier, ns } = await openTier(s.url, { writeAttempts: 3, backoffMs: 1 }, faults);
    const ref = block('lands on retry', 0);
    const result = await writeAndSettle(tier, jobFailingOnce(), [ref]);
    expect(result).toMatchObject({ ok: true, failure: null, retries: 1 });
    expect(faults.injected).toBe(1);
    expect(s.cli('exists', shardKey(ns, ref.digestHex, 0)).trim()).toBe('1');
  }, 30_000);

  it('a write that keeps failing is tried the configured number of times, then given up', async () => {
    const s = await server();
    const faults = injected(1);
    const { tier, ns } = await openTier(s.url, { writeAttempts: 4, backoffMs: 1 }, faults);
    const ref = block('given up', 1);
    const result = await writeAndSettle(tier, 1, [ref]);
    expect(result).toMatchObject({ ok: false, failure: 'injected', retries: 3, gaveUp: true });
    expect(faults.injected).toBe(4);
    expect(s.cli('exists', shardKey(ns, ref.digestHex, 0)).trim()).toBe('0');
  }, 30_000);

  it('a write the server refuses (its ACL forbids SET) is not retried', async () => {
    const s = await server();
    s.cli('acl', 'setuser', 'reader', 'on', '>pw', '~*', '&*', '+@all', '-set');
    const { tier } = await openTier(`redis://reader:pw@127.0.0.1:${s.port}`, { writeAttempts: 5, backoffMs: NEVER_MS });
    const result = await writeAndSettle(tier, 1, [block('refused', 2)]);
    expect(result).toMatchObject({ ok: false, failure: 'server', retries: 0, gaveUp: false });
  }, 30_000);

  it('shutdown gives up a write waiting for its retry: close does not wait out the backoff, and the write is not tried again', async () => {
    const s = await server();
    const faults = injected(1);
    const { tier } = await openTier(s.url, { writeAttempts: 5, backoffMs: NEVER_MS }, faults);
    tier.startStep({ writes: [{ jobId: 1, blocks: [block('shutdown', 3)] }], fetches: [] });
    expect(tier.pendingCount()).toBe(1);
    await tier.close();
    expect(tier.pendingCount()).toBe(0);
    expect(faults.injected).toBe(1);
  }, 30_000);

  it('a write sent while the server is down lands on a retry once the server is back', async () => {
    const s = await server();
    const { tier, ns } = await openTier(s.url, { writeAttempts: 12, backoffMs: 100 });
    await s.stop();
    const ref = block('server back', 4);
    tier.startStep({ writes: [{ jobId: 1, blocks: [ref] }], fetches: [] });
    const back = await startRedis({ port: s.port });
    servers.push(back);
    let result: RemoteJobResult | undefined;
    while (result === undefined) {
      await tier.waitForProgress(1_000);
      [result] = tier.collect();
    }
    expect(result).toMatchObject({ ok: true });
    expect(result.retries).toBeGreaterThanOrEqual(1);
    expect(back.cli('exists', shardKey(ns, ref.digestHex, 0)).trim()).toBe('1');
  }, 60_000);
});

describe.skipIf(!haveRedis)('an engine retrying its remote writes', () => {
  /** The Prometheus samples of the retry counters. */
  async function retrySamples(remote: RemoteTierMetrics): Promise<string[]> {
    const text = await createMetricsRegistry(() => ({ ...quietEngineMetrics(), remote })).metrics();
    return text.split('\n').filter((line) => /^kvtier_remote_write_(retried|given_up)_blocks_total /.test(line));
  }

  it('writes failing on about half their tries are retried and most land; the counts reach the metrics, and outputs stay correct', async () => {
    const s = await server();
    const config = remoteConfig(s.url, { faults: 'remote-fail:p=0.5', faultSeed: 11, remoteWriteAttempts: 6, remoteRetryBackoffMs: 1 });
    const run = await runEngine(config, asRequests(prompts(9_700, 6), 'a'));
    expectAllCorrect(run, 6);
    const writes = run.remote.writes;
    expect(writes.retried).toBeGreaterThan(0);
    // Landed on a retry: retried and not given up.
    expect(writes.retried - writes.givenUp).toBeGreaterThan(0);
    // Every block that landed was announced, and only those.
    const manifests = s.cli('--scan', '--pattern', 'kvt:*:m').split('\n').filter((line) => line !== '');
    expect(manifests).toHaveLength(writes.succeeded);
    expect(await retrySamples(run.remote)).toEqual([
      `kvtier_remote_write_retried_blocks_total ${writes.retried}`,
      `kvtier_remote_write_given_up_blocks_total ${writes.givenUp}`,
    ]);
  }, 120_000);

  it('writes that keep failing are each given up after their tries and counted, and outputs stay correct', async () => {
    const s = await server();
    const config = remoteConfig(s.url, { faults: 'remote-fail:p=1', remoteWriteAttempts: 3, remoteRetryBackoffMs: 1 });
    const run = await runEngine(config, asRequests(prompts(9_800, 4), 'a'));
    expectAllCorrect(run, 4);
    const writes = run.remote.writes;
    expect(writes.blocks).toBeGreaterThan(0);
    expect(writes.succeeded).toBe(0);
    expect(writes.givenUp).toBe(writes.blocks);
    expect(writes.retried).toBe(writes.blocks);
    expect(writes.failures).toEqual({ injected: writes.blocks });
    expect(run.remote.manifests.written).toBe(0);
  }, 120_000);
});
