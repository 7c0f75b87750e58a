import { describe, expect, it } from 'vitest';
import { blockHashes, blockHashKey, setBlockHashKey, type BlockHashKey } from '../../src/core/block-hash.js';
import { chainSeed, extendChain, remoteNamespace, shardKey } from '../../src/remote/remote-keys.js';
import { haveRedis, noteRedisSkip, redisServersPerTest } from '../support/redis-server.js';
import { TINY_NO_COMPUTE } from '../support/tiny.js';
import { asRequests, expectAllCorrect, prompts, remoteConfig, runEngine, runEngineProcess } from './remote-helpers.js';

/**
 * Local block hashes may be keyed with a secret of the process's own
 * (KVTIER_BLOCK_HASH_KEY), so two processes name the same prefix differently. Remote
 * keys must not follow them: engines sharing a server (with the same secret)
 * derive the same remote key for the same tokens whatever their local keys.
 */

noteRedisSkip('the remote key tests across block-hash keys');

const SECRET = 'a shared secret of enough bytes';
const OTHER_KEY: BlockHashKey = [0x9e3779b9, 0x7f4a7c15, 0xf39cc060, 0x5ced6f1a];

const server = redisServersPerTest();

/** Runs `body` with local block hashes under `key`, then puts the process's key back. */
async function underKey<T>(key: BlockHashKey, body: () => Promise<T>): Promise<T> {
  const before = blockHashKey();
  setBlockHashKey(key);
  try {
    return await body();
  } finally {
    setBlockHashKey(before);
  }
}

describe('remote keys and the local block-hash key', () => {
  it('the remote key of a block is the same under any local key, though the local hashes differ', async () => {
    const tokens = prompts(9_900, 1, 64)[0];
    const ns = remoteNamespace(
      { namespace: 'keys', model: TINY_NO_COMPUTE, layout: 'per-layer', blockSize: 16, offloadFactor: 1, tp: 2 },
      Buffer.from(SECRET),
    );
    const remoteKeys = () => {
      const chain: Buffer[] = [];
      extendChain(ns, chainSeed(ns, 'tenant'), chain, (p) => tokens[p], tokens.length);
      return chain.map((d) => shardKey(ns, d.toString('hex'), 1));
    };
    const mine = { local: blockHashes(tokens, 16, 'tenant'), remote: remoteKeys() };
    const other = await underKey(OTHER_KEY, async () => ({ local: blockHashes(tokens, 16, 'tenant'), remote: remoteKeys() }));
    expect(other.remote).toEqual(mine.remote);
    expect(other.local).not.toEqual(mine.local);
  });
});

describe.skipIf(!haveRedis)('engines under different block-hash keys sharing a server', () => {
  const PROMPTS = prompts(9_950, 4);

  it('an engine under another local key hits every prefix the first one wrote', async () => {
    const s = await server();
    const config = remoteConfig(s.url, { remoteSecret: SECRET });
    await runEngine(config, asRequests(PROMPTS, 'first'));
    const second = await underKey(OTHER_KEY, () => runEngine(config, asRequests(PROMPTS, 'second', 16)));
    expectAllCorrect(second, PROMPTS.length);
    expect(second.remote.hitTokens).toBe(PROMPTS.length * 128);
  }, 60_000);

  it('two processes, each under a secret block-hash key of its own, share prefixes through the server', async () => {
    const s = await server();
    const config = remoteConfig(s.url, { remoteSecret: SECRET });
    await runEngineProcess(config, asRequests(PROMPTS, 'first'), {}, { KVTIER_BLOCK_HASH_KEY: '0f1e2d3c4b5a69788796a5b4c3d2e1f0' });
    const second = await runEngineProcess(config, asRequests(PROMPTS, 'second', 16), {}, { KVTIER_BLOCK_HASH_KEY: 'f0e1d2c3b4a5968778695a4b3c2d1e0f' });
    expectAllCorrect(second, PROMPTS.length);
    expect(second.remote.hitTokens).toBe(PROMPTS.length * 128);
  }, 60_000);
});
