import { describe, expect, it } from 'vitest';
import { crc32c } from '../../src/core/crc32c.js';
import type { EngineConfigInput } from '../../src/runtime/engine-types.js';
import { RemoteStore } from '../../src/remote/remote-store.js';
import { parseRemoteUrl } from '../../src/remote/remote-url.js';
import { HEADER_BYTES } from '../../src/remote/value-format.js';
import { haveRedis, noteRedisSkip, redisServersPerTest, type RedisServer } from '../support/redis-server.js';
import { asRequests, expectAllCorrect, mismatches, prompts, remoteConfig, runEngine, type RemoteRun } from './remote-helpers.js';

/**
 * Forged remote values, written by someone who knows the value format and
 * every key on the server but not the tenant's secret: with a secret none is
 * ever served (each is a miss counted as a `value` failure, and the request
 * computes its blocks); without one, the server is trusted, and a forged
 * payload whose checksum was recomputed is served.
 */

noteRedisSkip('the remote authentication tests');

const SECRET = 'correct horse battery staple';
const AUTH_BYTES = 32;
const STORED = prompts(8_100, 4);

const server = redisServersPerTest();

function withSecret(url: string, extra: EngineConfigInput = {}): EngineConfigInput {
  return remoteConfig(url, { remoteSecret: SECRET, ...extra });
}

/** Where a value's payload starts: after the header and, when its flags say so, the MAC section. */
function payloadOffset(value: Buffer): number {
  return HEADER_BYTES + (value.readUInt16BE(10) === 0 ? 0 : AUTH_BYTES);
}

/** Rewrites the header's length and CRC-32C to fit the payload, as a forger knowing the format would. */
function fixChecksum(value: Buffer): Buffer {
  const payload = value.subarray(payloadOffset(value));
  value.writeUInt32BE(payload.length, 60);
  value.writeUInt32BE(crc32c(payload), 64);
  return value;
}

type Forgery = (key: string, value: Buffer, all: ReadonlyMap<string, Buffer>) => readonly (readonly [string, Buffer])[];

/** Applies a forgery to every shard value on the server matching `pattern`, through a plain client. */
async function forge(s: RedisServer, pattern: string, forgery: Forgery): Promise<number> {
  const keys = s.cli('--scan', '--pattern', pattern).split('\n').filter((k) => k.length > 0).sort();
  const store = new RemoteStore({ address: parseRemoteUrl(s.url), timeoutMs: 5_000, cluster: false });
  await store.connect();
  try {
    const values = await store.getMany(keys);
    const all = new Map(keys.map((k, i) => [k, values[i] as Buffer]));
    let written = 0;
    for (const [key, value] of all) {
      for (const [target, forged] of forgery(key, Buffer.from(value), all)) {
        await store.set(target, forged);
        written++;
      }
    }
    return written;
  } finally {
    await store.close();
  }
}

/** Every payload byte flipped, the checksum recomputed: plausible KV bytes of the wrong values. */
const changePayload: Forgery = (key, value) => {
  const at = payloadOffset(value);
  for (let i = at; i < value.length; i++) value[i] ^= 0x5a;
  return [[key, fixChecksum(value)]];
};

/** Each shard's value written under the next block's key, its header renamed to that block. */
const replayUnderAnotherKey: Forgery = (key, value, all) => {
  const keys = [...all.keys()];
  const next = keys[(keys.indexOf(key) + 1) % keys.length];
  const digest = Buffer.from(/\{([0-9a-f]{64})\}/.exec(next)![1], 'hex');
  digest.copy(value, 28);
  return [[next, value]];
};

/** The last half of the payload cut off, the header's length and checksum fitted to what is left. */
const truncate: Forgery = (key, value) => {
  const at = payloadOffset(value);
  return [[key, fixChecksum(Buffer.from(value.subarray(0, at + (value.length - at) / 2)))]];
};

/** The MAC section dropped and the flags cleared: a plain value a reader without a secret would take. */
const downgrade: Forgery = (key, value) => {
  const plain = Buffer.concat([value.subarray(0, HEADER_BYTES), value.subarray(HEADER_BYTES + AUTH_BYTES)]);
  plain.writeUInt16BE(0, 10);
  return [[key, fixChecksum(plain)]];
};

/** Runs STORED once to fill the server, forges its rank-0 shards, and runs STORED again in a second engine. */
async function readForged(config: (url: string) => EngineConfigInput, forgery: Forgery): Promise<RemoteRun> {
  const s = await server();
  await runEngine(config(s.url), asRequests(STORED, 'first'));
  expect(await forge(s, 'kvt:*:r0of2', forgery)).toBe(STORED.length * 8);
  return runEngine(config(s.url), asRequests(STORED, 'again', 16));
}

/** Every forged read was refused as a `value` failure and computed instead: no wrong output. */
function expectRefusedAndCorrect(run: RemoteRun): void {
  expect(run.remote.lookups.blocksFound).toBeGreaterThan(0);
  expect(run.remote.reads.failed).toBeGreaterThan(0);
  expect(run.remote.reads.failures.value).toBe(run.remote.reads.failed);
  expect(run.remote.reads.succeeded).toBe(0);
  expectAllCorrect(run, STORED.length);
}

describe.skipIf(!haveRedis)('remote values without a secret', () => {
  it('a payload changed with its checksum recomputed is served: the server must be trusted by everyone who can write to it', async () => {
    const run = await readForged((url) => remoteConfig(url), changePayload);
    expect(run.remote.reads.failed).toBe(0);
    expect(mismatches(run.finished).length).toBeGreaterThan(0);
  }, 60_000);
});

describe.skipIf(!haveRedis)('remote values authenticated with a secret', () => {
  it('are served to an engine holding the same secret', async () => {
    const s = await server();
    await runEngine(withSecret(s.url), asRequests(STORED, 'first'));
    const run = await runEngine(withSecret(s.url), asRequests(STORED, 'again', 16));
    expect(run.remote.reads.succeeded).toBeGreaterThan(0);
    expect(run.remote.reads.failed).toBe(0);
    expectAllCorrect(run, STORED.length);
  }, 60_000);

  it('a payload changed with its checksum recomputed is refused, and every output is correct', async () => {
    expectRefusedAndCorrect(await readForged((url) => withSecret(url), changePayload));
  }, 60_000);

  it('a value replayed under another block key, its header renamed, is refused, and every output is correct', async () => {
    expectRefusedAndCorrect(await readForged((url) => withSecret(url), replayUnderAnotherKey));
  }, 60_000);

  it('a truncated value whose header fits what is left is refused, and every output is correct', async () => {
    expectRefusedAndCorrect(await readForged((url) => withSecret(url), truncate));
  }, 60_000);

  it('a value stripped of its MAC and flagged plain is refused, and every output is correct', async () => {
    expectRefusedAndCorrect(await readForged((url) => withSecret(url), downgrade));
  }, 60_000);

  it('an encrypted payload changed with its checksum recomputed is refused, and every output is correct', async () => {
    expectRefusedAndCorrect(await readForged((url) => withSecret(url, { remoteEncrypt: true }), changePayload));
  }, 60_000);

  it('a tp-2 value reshaped into tp-4 shards under the keys a tp-4 engine wrote is refused, and every output is correct', async () => {
    const s = await server();
    await runEngine(withSecret(s.url), asRequests(STORED, 'first'));
    const tp4 = withSecret(s.url, { tp: 4 });
    await runEngine(tp4, asRequests(STORED, 'first'));
    const tp2Values = new Map<string, Buffer>();
    await forge(s, 'kvt:*:r*of2', (key, value) => {
      tp2Values.set(key.replace(/^kvt:[^{]*/, ''), value);
      return [];
    });
    // Each tp-2 shard's halves become the two tp-4 shards of the same rank pair, headers rewritten to match.
    const reshaped = await forge(s, 'kvt:*:r*of4', (key) => {
      const [, digest, rank] = /\{([0-9a-f]{64})\}:r(\d)of4$/.exec(key)!;
      const sources = [...tp2Values.values()];
      const source = sources[Number.parseInt(digest.slice(0, 8), 16) % sources.length];
      const at = payloadOffset(source);
      const half = (source.length - at) / 2;
      const part = source.subarray(at + (Number(rank) % 2) * half, at + (Number(rank) % 2 + 1) * half);
      const value = Buffer.concat([source.subarray(0, at), part]);
      value.writeUInt16BE(4, 6);
      value.writeUInt16BE(Number(rank), 8);
      Buffer.from(digest, 'hex').copy(value, 28);
      return [[key, fixChecksum(value)]];
    });
    expect(reshaped).toBeGreaterThan(0);
    expectRefusedAndCorrect(await runEngine(tp4, asRequests(STORED, 'again', 16)));
  }, 60_000);

  it('engines with different secrets find none of each other\'s blocks', async () => {
    const s = await server();
    await runEngine(withSecret(s.url), asRequests(STORED, 'first'));
    const run = await runEngine(remoteConfig(s.url, { remoteSecret: 'another secret of enough bytes' }), asRequests(STORED, 'again', 16));
    expect(run.remote.lookups.blocksFound).toBe(0);
    expectAllCorrect(run, STORED.length);
  }, 60_000);
});
