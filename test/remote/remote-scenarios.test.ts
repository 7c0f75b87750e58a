import { afterEach, describe, expect, it } from 'vitest';
import type { RemoteTestSwitches } from '../../src/protocol/remote-jobs.js';
import { haveRedis, noteRedisSkip, startRedis, startRedisCluster, type RedisServer } from '../support/redis-server.js';
import { asRequests, expectAllCorrect, prompts, remoteConfig, runEngine, runEngineProcess, type RemoteRun } from './remote-helpers.js';

/**
 * The remote tier against a real redis-server: engines share prefixes
 * through it, and a server that dies, evicts, serves corrupted values or is
 * a cluster never costs a wrong output. Each scenario runs again with the
 * behaviour it relies on switched off, to show the assertions catch it.
 */

noteRedisSkip('the remote tier scenarios');

const servers: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function server(options: Parameters<typeof startRedis>[0] = {}): Promise<RedisServer> {
  const s = await startRedis(options);
  servers.push(s);
  return s;
}

const PROMPTS = prompts();
/** Full 16-token blocks of each prompt the second engine can take from the remote (its last token is always computed). */
const SHAREABLE_TOKENS = PROMPTS.length * 128;

/** One engine process stores the prompts; a second process asks them again with new tails. */
async function twoProcessesShareOneServer(switches: RemoteTestSwitches): Promise<{ first: RemoteRun; second: RemoteRun }> {
  const s = await server();
  const first = await runEngineProcess(remoteConfig(s.url), asRequests(PROMPTS, 'first'), switches);
  const second = await runEngineProcess(remoteConfig(s.url), asRequests(PROMPTS, 'second', 16), switches);
  return { first, second };
}

function expectSecondHitsTheFirstsPrefixes({ first, second }: { first: RemoteRun; second: RemoteRun }): void {
  expectAllCorrect(first, PROMPTS.length);
  expectAllCorrect(second, PROMPTS.length);
  expect(second.remote.hitTokens).toBe(SHAREABLE_TOKENS);
  expect(second.metrics.tokens.prefillComputed).toBe(PROMPTS.length * 16);
}

/** The first engine fills the server; the server is killed as soon as the second found blocks there, then restarted empty. */
async function serverKilledMidRun(switches: RemoteTestSwitches): Promise<{ second: RemoteRun; third: RemoteRun }> {
  const s = await server();
  await runEngine(remoteConfig(s.url), asRequests(PROMPTS, 'first'), switches);
  let killed = false;
  const second = await runEngine(remoteConfig(s.url), asRequests(PROMPTS, 'second', 16), switches, async (m) => {
    if (!killed && (m.remote?.lookups.blocksFound ?? 0) > 0) {
      killed = true;
      await s.stop();
    }
  });
  // Restarted empty on the same port: a later engine runs on.
  const restarted = await server({ port: s.port });
  const third = await runEngine(remoteConfig(restarted.url), asRequests(PROMPTS, 'third', 32), switches);
  return { second, third };
}

function expectCorrectWithFailuresCounted({ second, third }: { second: RemoteRun; third: RemoteRun }): void {
  expectAllCorrect(second, PROMPTS.length);
  expect(second.remote.reads.failed).toBeGreaterThan(0);
  expect(second.remote.writes.failed).toBeGreaterThan(0);
  expectAllCorrect(third, PROMPTS.length);
  expect(third.remote.writes.succeeded).toBeGreaterThan(0);
}

/**
 * The server keeps about 2 MB: the first engine's blocks overflow it, so some
 * shards are evicted while their manifest stays. The second engine asks for
 * its whole queue at once, so its own writes evict shards between lookups
 * and fetches too.
 */
async function serverEvicts(switches: RemoteTestSwitches): Promise<RemoteRun> {
  const s = await server({ maxmemory: '1500kb' });
  const many = prompts(4_000, 48, 256);
  await runEngine(remoteConfig(s.url, { cpuBlocks: 1024 }), asRequests(many, 'fill'), switches);
  return runEngine(remoteConfig(s.url, { cpuBlocks: 1024 }), asRequests(many, 'again', 16), { ...switches, lookupWholeQueue: true });
}

function expectMissesRecovered(run: RemoteRun): void {
  expectAllCorrect(run, 48);
  expect(run.remote.reads.failures.miss ?? 0).toBeGreaterThan(0);
}

/** Every rank-0 shard the first engine wrote is overwritten in place through a plain client. */
async function corruptedValues(switches: RemoteTestSwitches): Promise<RemoteRun> {
  const s = await server();
  await runEngine(remoteConfig(s.url), asRequests(PROMPTS, 'first'), switches);
  const keys = s.cli('--scan', '--pattern', 'kvt:*:r0of2').split('\n').filter((k) => k.length > 0);
  expect(keys.length).toBe(PROMPTS.length * 8);
  for (const key of keys) s.cli('setrange', key, '200', 'CORRUPTED');
  return runEngine(remoteConfig(s.url), asRequests(PROMPTS, 'second', 16), switches);
}

function expectCorruptionDetected(run: RemoteRun): void {
  expectAllCorrect(run, PROMPTS.length);
  expect(run.remote.reads.failures.value ?? 0).toBeGreaterThan(0);
  expect(run.remote.hitTokens).toBe(0);
}

/** Two engines share a 3-node cluster. */
async function clusterServesTheTier(switches: RemoteTestSwitches): Promise<{ second: RemoteRun; keysPerNode: number[] }> {
  const cluster = await startRedisCluster();
  servers.push(cluster);
  await runEngine(remoteConfig(cluster.url), asRequests(PROMPTS, 'first'), switches);
  const second = await runEngine(remoteConfig(cluster.url), asRequests(PROMPTS, 'second', 16), switches);
  return { second, keysPerNode: cluster.nodes.map((n) => Number(n.cli('dbsize').trim())) };
}

function expectClusterHits({ second, keysPerNode }: { second: RemoteRun; keysPerNode: number[] }): void {
  expectAllCorrect(second, PROMPTS.length);
  expect(second.remote.hitTokens).toBe(SHAREABLE_TOKENS);
  expect(keysPerNode.filter((n) => n > 0)).toHaveLength(3);
}

describe.skipIf(!haveRedis)('the remote tier on a real server', () => {
  it('two engine processes share one server, and the second hits the prefixes the first stored', async () => {
    expectSecondHitsTheFirstsPrefixes(await twoProcessesShareOneServer({}));
  });

  it('without manifests, the second process finds nothing', async () => {
    const run = await twoProcessesShareOneServer({ skipManifests: true });
    expect(() => expectSecondHitsTheFirstsPrefixes(run)).toThrow();
  });

  it('a server killed mid-run costs recomputation, never a wrong output, and a restarted empty server serves on', async () => {
    expectCorrectWithFailuresCounted(await serverKilledMidRun({}));
  });

  it('taking failed fetches as ok after the server was killed gives wrong outputs', async () => {
    const run = await serverKilledMidRun({ reportFailedFetchesAsOk: true });
    expect(() => expectCorrectWithFailuresCounted(run)).toThrow();
  });

  it('blocks the server evicted under a small maxmemory are recomputed', async () => {
    expectMissesRecovered(await serverEvicts({}));
  });

  it('taking failed fetches as ok after evictions gives wrong outputs', async () => {
    const run = await serverEvicts({ reportFailedFetchesAsOk: true });
    expect(() => expectMissesRecovered(run)).toThrow();
  });

  it('a value overwritten through a plain client fails its checksum and is recomputed', async () => {
    expectCorruptionDetected(await corruptedValues({}));
  });

  it('without the value check, the corrupted values give wrong outputs', async () => {
    const run = await corruptedValues({ skipValueCheck: true });
    expect(() => expectCorruptionDetected(run)).toThrow();
  });

  it('a 3-node Redis Cluster on loopback serves the tier', async () => {
    expectClusterHits(await clusterServesTheTier({}));
  });

  it('a client that ignores the cluster loses the hits', async () => {
    const run = await clusterServesTheTier({ ignoreCluster: true });
    expect(() => expectClusterHits(run)).toThrow();
  });
});
