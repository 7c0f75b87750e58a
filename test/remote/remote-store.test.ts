import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { RemoteConfigError, RemoteUnavailableError } from '../../src/remote/errors.js';
import { Engine } from '../../src/runtime/engine.js';
import { chainSeed, extendChain, manifestKey, remoteNamespace, shardKey, type RemoteNamespaceInput } from '../../src/remote/remote-keys.js';
import { probeRemote, reconnectDelayMs, RemoteOperationError, RemoteStore } from '../../src/remote/remote-store.js';
import { maskRemoteUrl, parseRemoteUrl } from '../../src/remote/remote-url.js';
import { encodeManifest } from '../../src/remote/value-format.js';
import { decodeShard, encodeShard } from './shard-values.js';
import { freeLoopbackPort } from '../../src/core/loopback-port.js';
import { haveRedis, noteRedisSkip, startRedis, startRedisCluster, type RedisServer } from '../support/redis-server.js';

const base: RemoteNamespaceInput = {
  namespace: 'tiny',
  model: MODEL_PRESETS.tiny,
  layout: 'cross-layer',
  blockSize: 4,
  offloadFactor: 1,
  tp: 2,
};

function digestsOf(input: RemoteNamespaceInput, tokens: number[], salt: string | null = null, secret: Buffer | null = null): string[] {
  const ns = remoteNamespace(input, secret);
  const chain: Buffer[] = [];
  extendChain(ns, chainSeed(ns, salt), chain, (i) => tokens[i], tokens.length);
  return chain.map((d) => d.toString('hex'));
}

const prompt = Array.from({ length: 16 }, (_, i) => (i * 7919) % 1000);

describe('remote keys', () => {
  it('are the same in every process for the same tokens, namespace and shape', () => {
    expect(digestsOf(base, prompt)).toEqual(digestsOf({ ...base, model: { ...MODEL_PRESETS.tiny } }, prompt));
    expect(digestsOf(base, prompt)).toHaveLength(4);
  });

  it('differ by namespace, model, layout, block size, tp and cache salt', () => {
    const plain = digestsOf(base, prompt)[0];
    expect(digestsOf({ ...base, namespace: 'other' }, prompt)[0]).not.toBe(plain);
    expect(digestsOf({ ...base, model: MODEL_PRESETS.small }, prompt)[0]).not.toBe(plain);
    expect(digestsOf({ ...base, layout: 'per-layer' }, prompt)[0]).not.toBe(plain);
    expect(digestsOf({ ...base, tp: 1 }, prompt)[0]).not.toBe(plain);
    expect(digestsOf({ ...base, blockSize: 8 }, prompt)[0]).not.toBe(digestsOf({ ...base, offloadFactor: 2 }, prompt)[0]);
    expect(digestsOf(base, prompt, 'tenant-a')[0]).not.toBe(plain);
    expect(digestsOf(base, prompt, 'tenant-a')[0]).not.toBe(digestsOf(base, prompt, 'tenant-b')[0]);
  });

  it('take an empty cache salt as no salt, as the local block hashes do', () => {
    expect(digestsOf(base, prompt, '')).toEqual(digestsOf(base, prompt, null));
  });

  it('with a secret, differ from the public chain and by secret, so no one without it can name a prompt\'s blocks', () => {
    const keyed = digestsOf(base, prompt, null, Buffer.from('sixteen-or-more-bytes'));
    expect(keyed).toEqual(digestsOf(base, prompt, null, Buffer.from('sixteen-or-more-bytes')));
    expect(keyed[0]).not.toBe(digestsOf(base, prompt)[0]);
    expect(keyed[0]).not.toBe(digestsOf(base, prompt, null, Buffer.from('another-secret-bytes'))[0]);
  });

  it('chain: a block key depends on every token before it', () => {
    const changed = [...prompt];
    changed[0] += 1;
    const a = digestsOf(base, prompt);
    const b = digestsOf(base, changed);
    for (let i = 0; i < a.length; i++) expect(b[i]).not.toBe(a[i]);
  });

  it("put a block's shards and manifest in one cluster slot through a hash tag", () => {
    const ns = remoteNamespace(base);
    const hex = digestsOf(base, prompt)[1];
    const tag = (key: string) => /\{([^}]*)\}/.exec(key)?.[1];
    expect(tag(shardKey(ns, hex, 0))).toBe(hex);
    expect(tag(shardKey(ns, hex, 1))).toBe(hex);
    expect(tag(manifestKey(ns, hex))).toBe(hex);
  });

  it('refuse a namespace that would break the hash tag, naming the field', () => {
    expect(() => remoteNamespace({ ...base, namespace: 'a{b}' })).toThrow(/remoteNamespace: 'a\{b\}'/);
  });
});

describe('remote URLs', () => {
  it('never show the password', () => {
    expect(maskRemoteUrl('rediss://alice:s3cret@cache.internal:6380')).toBe('rediss://alice:***@cache.internal:6380');
    const address = parseRemoteUrl('rediss://alice:s3cret@cache.internal:6380/2');
    expect(address).toMatchObject({ host: 'cache.internal', port: 6380, tls: true, username: 'alice', password: 's3cret', db: 2 });
    expect(address.masked).not.toContain('s3cret');
  });

  it('refuse other schemes and bad databases, naming the field and the masked URL', () => {
    expect(() => parseRemoteUrl('http://u:pw@h:1')).toThrow(/^remote: 'http:\/\/u:\*\*\*@h:1' has scheme 'http'/);
    expect(() => parseRemoteUrl('redis://h:1/x', 'remote')).toThrow(/database 'x'/);
    expect(() => parseRemoteUrl('not a url')).toThrow(/remote: 'not a url' is not a URL/);
  });

  /** The message of what parsing `url` throws: always a RemoteConfigError naming the field, never the secret. */
  const refusal = (url: string, secret: string): string => {
    try {
      parseRemoteUrl(url, '--remote');
    } catch (error) {
      expect(error).toBeInstanceOf(RemoteConfigError);
      const message = (error as Error).message;
      expect(message.startsWith('--remote: ')).toBe(true);
      expect(message).not.toContain(secret);
      return message;
    }
    return 'accepted';
  };

  it('mask passwords holding / @ ? # and passwords given as a query', () => {
    expect(maskRemoteUrl('redis://alice:pa/ss@h:1')).toBe('redis://alice:***@h:1');
    expect(maskRemoteUrl('redis://alice:p@ss@h:1/2')).toBe('redis://alice:***@h:1/2');
    expect(maskRemoteUrl('redis://alice:a?b#c@h:1')).toBe('redis://alice:***@h:1');
    expect(maskRemoteUrl('redis://h:1?password=s3cret&x=1')).toBe('redis://h:1?password=***&x=1');
    expect(maskRemoteUrl('redis://h:1/0?db=1&pass=s3cret')).toBe('redis://h:1/0?db=1&pass=***');
    expect(maskRemoteUrl('redis://alice@h:1')).toBe('redis://alice@h:1');
  });

  it('refuse, never throw past the field, a stray % in a password, a password with a raw /, and a query', () => {
    expect(refusal('redis://alice:50%off@h:1', '50%off')).toBe(
      "--remote: 'redis://alice:***@h:1': the password has a % not followed by two hex digits; write a literal % as %25",
    );
    expect(refusal('redis://al%zice:pw@h:1', 'pw')).toMatch(/the user name has a % not followed/);
    expect(refusal('redis://alice:pa/ss@h:1', 'pa/ss')).toMatch(/is not a URL .*percent-encode/);
    expect(refusal('redis://h:1?password=s3cret', 's3cret')).toMatch(/has a query .* give the password as redis:\/\/user:password@host:port/);
    expect(parseRemoteUrl('redis://alice:50%25off%2F%40@h:1').password).toBe('50%off/@');
    expect(parseRemoteUrl('redis://alice:p@ss@h:1').password).toBe('p@ss');
  });

  it("refused in Engine.create naming the key", async () => {
    await expect(Engine.create({ remote: 'redis://alice:50%off@127.0.0.1:1', cpuBlocks: 16 })).rejects.toThrow(
      "invalid engine config: remote: 'redis://alice:***@127.0.0.1:1': the password has a % not followed by two hex digits",
    );
  });
});

describe('remote values', () => {
  const ns = remoteNamespace(base);
  const digest = Buffer.from(digestsOf(base, prompt)[0], 'hex');
  const payload = Buffer.from(Array.from({ length: 300 }, (_, i) => i & 0xff));

  it('round-trip a shard through its header', () => {
    const value = encodeShard(ns, { digest, rank: 1 }, payload);
    expect(decodeShard(ns, { digest, rank: 1 }, payload.length, value).equals(payload)).toBe(true);
  });

  it('refuse a changed byte by its checksum, and a value of another rank, block, namespace or length', () => {
    const value = encodeShard(ns, { digest, rank: 1 }, payload);
    const flipped = Buffer.from(value);
    flipped[flipped.length - 5] ^= 1;
    const fault = (f: () => unknown) => {
      try {
        f();
      } catch (error) {
        return (error as { fault?: string }).fault;
      }
      return 'accepted';
    };
    expect(fault(() => decodeShard(ns, { digest, rank: 1 }, payload.length, flipped))).toBe('checksum');
    expect(fault(() => decodeShard(ns, { digest, rank: 0 }, payload.length, value))).toBe('shard');
    const other = Buffer.from(digestsOf(base, prompt)[1], 'hex');
    expect(fault(() => decodeShard(ns, { digest: other, rank: 1 }, payload.length, value))).toBe('hash');
    expect(fault(() => decodeShard(remoteNamespace({ ...base, namespace: 'x' }), { digest, rank: 1 }, payload.length, value))).toBe(
      'namespace',
    );
    expect(fault(() => decodeShard(ns, { digest, rank: 1 }, payload.length, value.subarray(0, value.length - 1)))).toBe('length');
    expect(fault(() => decodeShard(ns, { digest, rank: 1 }, payload.length, Buffer.from('plain string')))).toBe('format');
    expect(encodeManifest(ns, digest).length).toBeGreaterThan(0);
  });
});

describe('reconnect backoff', () => {
  it('doubles from 50 ms and stays at 2 s', () => {
    expect([1, 2, 3, 4, 10, 100].map(reconnectDelayMs)).toEqual([50, 100, 200, 400, 2000, 2000]);
  });
});

noteRedisSkip('the remote store tests');

describe.skipIf(!haveRedis)('the remote store against a real redis-server', () => {
  let server: RedisServer;
  let store: RemoteStore;

  beforeAll(async () => {
    server = await startRedis({ password: 'p@ss word' });
    store = new RemoteStore({ address: parseRemoteUrl(`redis://default:${encodeURIComponent('p@ss word')}@127.0.0.1:${server.port}`), timeoutMs: 500, cluster: false });
    await store.connect();
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  it('stores and reads binary values, and answers pipelined existence checks in order', async () => {
    const value = Buffer.from([0, 255, 13, 10, 0, 1]);
    await store.set('kvt:test:{a}:r0', value);
    expect((await store.get('kvt:test:{a}:r0'))?.equals(value)).toBe(true);
    expect(await store.get('kvt:test:{missing}:r0')).toBeNull();
    expect(await store.exists(['kvt:test:{a}:r0', 'kvt:test:{b}:r0', 'kvt:test:{a}:r0'])).toEqual([true, false, true]);
  });

  it('sends a batch of values at once and reads many back in order, null where none is held', async () => {
    const keys = ['kvt:test:{m0}:r0', 'kvt:test:{m1}:r0', 'kvt:test:{m2}:r0'];
    const values = keys.map((_, i) => Buffer.from([i, 0, 13, 10, 255]));
    await Promise.all(store.setNow(keys.map((k, i) => [k, values[i]] as const)));
    // Written through one pipeline, read by plain GETs and by one MGET.
    expect((await store.get(keys[1]))?.equals(values[1])).toBe(true);
    const back = await store.getMany([keys[2], 'kvt:test:{gone}:r0', keys[0]]);
    expect(back.map((v) => v?.toString('hex') ?? null)).toEqual([values[2].toString('hex'), null, values[0].toString('hex')]);
    expect((await store.getMany([keys[1]]))[0]?.equals(values[1])).toBe(true);
    expect(store.setNow([])).toEqual([]);
  });

  it('with SETs batched by the caller, sends lone values and batches alike', async () => {
    const own = new RemoteStore({ ...store.options, ownSetBatches: true });
    try {
      await own.connect();
      const big = Buffer.alloc(3 << 20, 0x5a);
      await Promise.all(own.setNow([['kvt:test:{big}:r0', big]]));
      await Promise.all(own.setNow([['kvt:test:{s0}:r0', Buffer.from('a')], ['kvt:test:{s1}:r0', Buffer.from('b')]]));
      expect((await store.get('kvt:test:{big}:r0'))?.equals(big)).toBe(true);
      expect((await own.getMany(['kvt:test:{s0}:r0', 'kvt:test:{s1}:r0'])).map(String)).toEqual(['a', 'b']);
    } finally {
      await own.close();
    }
  });

  it('times a command out when the server does not answer', async () => {
    server.cli('client', 'pause', '900', 'ALL');
    const error = await store.get('kvt:test:{a}:r0').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteOperationError);
    expect((error as RemoteOperationError).kind).toBe('timeout');
    await new Promise((r) => setTimeout(r, 1000));
  });

  it('reports an unreachable server with the URL, password masked', async () => {
    const port = await freeLoopbackPort();
    const error = await probeRemote(parseRemoteUrl(`redis://default:hunter2@127.0.0.1:${port}`), 300).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteUnavailableError);
    expect((error as Error).message).toContain(`redis://default:***@127.0.0.1:${port}`);
    expect((error as Error).message).not.toContain('hunter2');
  });

  it('reports a server that accepts but never answers as not answering in time, naming the timeout setting', async () => {
    const silent = createServer(() => {}).listen(0, '127.0.0.1');
    await new Promise((r) => silent.once('listening', r));
    const port = (silent.address() as AddressInfo).port;
    try {
      const error = await probeRemote(parseRemoteUrl(`redis://127.0.0.1:${port}`), 300).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RemoteUnavailableError);
      expect((error as Error).message).toMatch(new RegExp(`^remote tier redis://127\\.0\\.0\\.1:${port} did not answer within 1000 ms \\(.*\\); if it is up but slow or far away, raise --remote-timeout-ms`));
      expect((error as Error).message).not.toMatch(/max retries/i);
    } finally {
      silent.close();
    }
  });
});

describe.skipIf(!haveRedis)('a remote store losing its server', () => {
  it('fails commands at once while the server is down and reconnects when it is back', async () => {
    let server = await startRedis();
    const store = new RemoteStore({ address: parseRemoteUrl(server.url), timeoutMs: 500, cluster: false });
    try {
      await store.connect();
      await store.set('k', Buffer.from('v'));
      await server.stop();
      await new Promise((r) => setTimeout(r, 100));
      const error = (await store.get('k').catch((e: unknown) => e)) as RemoteOperationError;
      expect(error.kind).toBe('connection');
      const [sent] = store.setNow([['k', Buffer.from('w')]]);
      expect(((await sent.catch((e: unknown) => e)) as RemoteOperationError).kind).toBe('connection');
      expect(((await store.getMany(['k', 'j']).catch((e: unknown) => e)) as RemoteOperationError).kind).toBe('connection');
      server = await startRedis({ port: server.port });
      const deadline = Date.now() + 5000;
      while (!store.connected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      // Restarted empty: the value is gone, the connection works.
      expect(await store.get('k')).toBeNull();
      expect(store.stats().reconnects).toBeGreaterThan(0);
    } finally {
      await store.close();
      await server.stop();
    }
  });
});

describe.skipIf(!haveRedis)('the remote store on a 3-node cluster', () => {
  it('is found to be a cluster and routes keys of many slots', async () => {
    const cluster = await startRedisCluster();
    const address = parseRemoteUrl(cluster.url);
    const { cluster: isCluster } = await probeRemote(address, 1000);
    expect(isCluster).toBe(true);
    const store = new RemoteStore({ address, timeoutMs: 1000, cluster: true });
    try {
      await store.connect();
      const keys = Array.from({ length: 30 }, (_, i) => `kvt:test:{block${i}}:r0`);
      await Promise.all(keys.map((k, i) => store.set(k, Buffer.from([i]))));
      const values = await Promise.all(keys.map((k) => store.get(k)));
      expect(values.map((v) => v?.[0])).toEqual(keys.map((_, i) => i));
      // The keys landed on more than one node.
      const perNode = cluster.nodes.map((n) => Number(n.cli('dbsize').trim()));
      expect(perNode.filter((n) => n > 0).length).toBeGreaterThan(1);
      // Batches and multi-key reads span slots too.
      await Promise.all(store.setNow(keys.map((k, i) => [k, Buffer.from([i + 100])] as const)));
      expect((await store.getMany(keys)).map((v) => v?.[0])).toEqual(keys.map((_, i) => i + 100));
    } finally {
      await store.close();
      await cluster.stop();
    }
  });
});
