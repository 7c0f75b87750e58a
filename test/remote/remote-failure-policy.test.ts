import { afterEach, describe, expect, it } from 'vitest';
import type { EngineConfigInput } from '../../src/runtime/engine-types.js';
import { haveRedis, noteRedisSkip, startRedis, type RedisServer } from '../support/redis-server.js';
import { asRequests, expectAllCorrect, mismatches, prompts, remoteConfig, runEngine, type RemoteRun } from './remote-helpers.js';

/**
 * Remote reads that fail after the lookup go through the load-failure path:
 * their blocks count as failed loads (cause `remote`), and the requests that
 * waited for them recompute, or under failurePolicy 'fail' finish with an
 * error, while every other request runs on correctly and nothing leaks.
 */

noteRedisSkip('the remote failure policy tests');

const servers: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

const STORED = prompts(6_100, 6);
const FRESH = prompts(6_300, 4);

/** A first engine stores STORED; every rank-0 shard is then overwritten in place through a plain client. */
async function serverWithCorruptedValues(): Promise<RedisServer> {
  const s = await startRedis();
  servers.push(s);
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
  const s = await startRedis();
  servers.push(s);
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

function expectFailedReadsCounted(run: RemoteRun): void {
  expect(run.remote.reads.failed).toBeGreaterThan(0);
  expect(run.remoteLoadFailedBlocks).toBe(run.remote.reads.failed);
  expect(run.metrics.loadFailures.blocks).toBeGreaterThanOrEqual(run.remote.reads.failed);
}

/** Requests whose remote read failed end with 'error'; every other one is correct. */
function expectReadersFailedOthersCorrect(run: RemoteRun): void {
  const failed = run.finished.filter((f) => f.finishReason === 'error');
  expect(failed.length).toBeGreaterThan(0);
  for (const f of failed) {
    expect(f.id.startsWith('again')).toBe(true);
    expect(f.errorMessage).toMatch(/remote tier .*failurePolicy is 'fail'/);
  }
  expect(run.metrics.requests.failed).toBe(failed.length);
  const others = run.finished.filter((f) => f.finishReason !== 'error');
  expect(others.length + failed.length).toBe(STORED.length + FRESH.length);
  expect(others.filter((f) => f.id.startsWith('fresh'))).toHaveLength(FRESH.length);
  expect(mismatches(others)).toEqual([]);
}

describe.skipIf(!haveRedis)('remote read failures and the failure policy', () => {
  it("under 'fail', requests whose values fail their checksum finish with an error, and the rest are correct", async () => {
    const run = await readCorruptedValues('fail');
    expectFailedReadsCounted(run);
    expectReadersFailedOthersCorrect(run);
    expect(run.finished.filter((f) => f.finishReason === 'error')).toHaveLength(STORED.length);
  }, 60_000);

  it("under 'recompute', the same corrupted values are recomputed and every output is correct", async () => {
    const run = await readCorruptedValues('recompute');
    expectFailedReadsCounted(run);
    expectAllCorrect(run, STORED.length + FRESH.length);
    expect(run.metrics.loadFailures.requestsRecovered).toBe(STORED.length);
  }, 60_000);

  it("under 'fail', a server killed mid-run fails the requests whose fetches it cut, and the rest are correct", async () => {
    const run = await serverKilledAfterLookups('fail');
    expectFailedReadsCounted(run);
    expectReadersFailedOthersCorrect(run);
  }, 60_000);

  it("under 'recompute', a server killed mid-run costs recomputation only", async () => {
    const run = await serverKilledAfterLookups('recompute');
    expectFailedReadsCounted(run);
    expectAllCorrect(run, STORED.length + FRESH.length);
  }, 60_000);
});
