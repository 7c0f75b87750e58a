import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/runtime/engine.js';
import { haveRedis, noteRedisSkip, redisServersPerTest, type RedisServer } from '../support/redis-server.js';
import { kvtier } from '../cli-e2e/cli.js';
import { asRequests, expectAllCorrect, prompts, remoteConfig, runEngine } from './remote-helpers.js';

/**
 * The database index of a remote URL: engines use the database they name,
 * and one the server does not have stops the engine at start, never falling
 * back to database 0 (where tenants kept apart by database would meet).
 */

noteRedisSkip('the remote database tests');

const server = redisServersPerTest();

const keysIn = (s: RedisServer, db: number) => s.cli('-n', String(db), '--scan', '--pattern', 'kvt:*').split('\n').filter((k) => k.length > 0);

describe.skipIf(!haveRedis)('the remote database index', () => {
  it('a database the server has holds every key, and database 0 none', async () => {
    const s = await server();
    const run = await runEngine(remoteConfig(`${s.url}/5`), asRequests(prompts(9_100, 2), 'a'));
    expectAllCorrect(run, 2);
    expect(keysIn(s, 5).length).toBeGreaterThan(0);
    expect(keysIn(s, 0)).toEqual([]);
  }, 60_000);

  it('a database the server does not have stops the engine at start, naming it and the server\'s words', async () => {
    // The password is right, so the one refusal is the database's (a wrong one would race it), and it is masked.
    const s = await server({ password: 'pa55word' });
    const refusal = Engine.create(remoteConfig(`${s.url}/16`, { backend: 'host', model: 'tiny' }));
    await expect(refusal).rejects.toMatchObject({ code: 'ERR_KVTIER_REMOTE_UNAVAILABLE' });
    await expect(refusal).rejects.toThrow(/redis:\/\/default:\*\*\*@127\.0\.0\.1:\d+\/16: the server refuses database 16 \(.*DB index is out of range/);
    expect(keysIn(s, 0)).toEqual([]);
  }, 60_000);

  it('kvtier run exits 2 with one line for it', async () => {
    const s = await server();
    const result = await kvtier(['run', '--remote', `${s.url}/16`, '--requests', '2', '--rounds', '1']);
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^kvtier: remote tier .*\/16: the server refuses database 16/)]);
  }, 60_000);
});
