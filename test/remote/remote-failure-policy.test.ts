import { describe, expect, it } from 'vitest';
import type { EngineConfigInput } from '../../src/runtime/engine-types.js';
import { haveRedis, noteRedisSkip, redisServersPerTest, type RedisServer } from '../support/redis-server.js';
import { asRequests, expectAllCorrect, prompts, remoteConfig, runEngine, type RemoteRun } from './remote-helpers.js';

/**
 * Remote reads that fail after the lookup are misses: their blocks count as
 * failed loads (cause `remote`), and the requests that waited for them compute
 * them under every failure policy ('fail' is about blocks the engine held and
 * lost, which a remote read never was), while nothing leaks.
 */

noteRedisSkip('the remote failure policy tests');

const server = redisServersPerTest();

const STORED = prompts(6_100, 6);
const FRESH = prompts(6_300, 4);

/** A first engine stores STORED; every rank-0 shard is then overwritten in place through a plain client. */
async function serverWithCorruptedValues(): Promise<RedisServer> {
  const s = await server();
  await runEngine(remoteConfig(s.url), asRequests(STORED, 'first'));
  const keys = s.cli('--scan', '--pattern', 'kvt:*:r0of2').split('\n').filter((k) => k.length > 0);
  expect(keys.length).toBe(STORED.length * 8);
  for (const key of keys) s.cli('setrange', key, '200', 'CORRUPTED');
  return s;
}

/** A second engine asks STORED again (their reads fail their checksum) beside FRESH prompts the remote never held. */
async function readCorruptedValues(policy: EngineConfigInput['failurePolicy']): Promise<RemoteRun> {
  const s = await serverWithCorruptedValues();
  const requests = [...asRequests(STORED, 'again', 16), ...asRequests(FRESH, 'fresh')];
  return runEngine(remoteConfig(s.url, { failurePolicy: policy }), requests);
}

/** The server is killed as soon as the second engine found blocks there: the fetches then in flight fail. */
async function serverKilledAfterLookups(policy: EngineConfigInput['failurePolicy']): Promise<RemoteRun> {
  const s = await server();
  await runEngine(remoteConfig(s.url), asRequests(STORED, 'first'));
  let killed = false;
  const requests = [...asRequests(STORED, 'again', 16), ...asRequests(FRESH, 'fresh')];
  return runEngine(remoteConfig(s.url, { failurePolicy: policy }), requests, {}, async (m) => {
    if (!killed && (m.remote?.lookups.blocksFound ?? 0) > 0) {
      killed = true;
      await s.stop();
    }
  });
}

/**
 * A first engine stores STORED; the server then loses every shard but keeps the
 * manifests (as an LRU eviction of the shards would), so a second engine's
 * lookups find the blocks and its fetches miss.
 */
async function readEvictedValues(policy: EngineConfigInput['failurePolicy']): Promise<RemoteRun> {
  const s = await server();
  await runEngine(remoteConfig(s.url), asRequests(STORED, 'first'));
  const shards = s.cli('--scan', '--pattern', 'kvt:*:r*of2').split('\n').filter((k) => k.length > 0);
  expect(shards.length).toBe(STORED.length * 8 * 2);
  for (const key of shards) s.cli('del', key);
  const requests = [...asRequests(STORED, 'again', 16), ...asRequests(FRESH, 'fresh')];
  return runEngine(remoteConfig(s.url, { failurePolicy: policy }), requests);
}

function expectFailedReadsCounted(run: RemoteRun): void {
  expect(run.remote.reads.failed).toBeGreaterThan(0);
  expect(run.remoteLoadFailedBlocks).toBe(run.remote.reads.failed);
  expect(run.metrics.loadFailures.blocks).toBeGreaterThanOrEqual(run.remote.reads.failed);
}

describe.skipIf(!haveRedis)('remote read failures and the failure policy', () => {
  for (const policy of ['fail', 'recompute'] as const) {
    it(`under '${policy}', values that fail their checksum are computed instead and every output is correct`, async () => {
      const run = await readCorruptedValues(policy);
      expectFailedReadsCounted(run);
      expectAllCorrect(run, STORED.length + FRESH.length);
      expect(run.metrics.requests.failed).toBe(0);
      expect(run.metrics.loadFailures.requestsRecovered).toBe(STORED.length);
    }, 60_000);

    it(`under '${policy}', a server killed mid-run costs computation only`, async () => {
      const run = await serverKilledAfterLookups(policy);
      expectFailedReadsCounted(run);
      expectAllCorrect(run, STORED.length + FRESH.length);
      expect(run.metrics.requests.failed).toBe(0);
    }, 60_000);
  }

  it("under 'fail', blocks the server evicted after the lookup are computed instead and every output is correct", async () => {
    const run = await readEvictedValues('fail');
    expect(run.remote.reads.failures.miss).toBe(run.remote.reads.failed);
    expectFailedReadsCounted(run);
    expectAllCorrect(run, STORED.length + FRESH.length);
    expect(run.metrics.requests.failed).toBe(0);
  }, 60_000);
});
