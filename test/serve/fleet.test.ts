import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/serve/serve-app.js';
import { haveRedis, noteRedisSkip, startRedis, type RedisServer } from '../support/redis-server.js';
import { cachedOf, openaiClient, referenceOutput, startTestServer, tokenIdsOf, tokenPrompt, until } from './helpers.js';

/**
 * A fleet of two `kvtier serve` processes' worth of servers sharing one
 * Redis tier: a prompt one of them served is a remote hit on the other,
 * reported per tier in `usage`, with the reference model's output.
 */

noteRedisSkip('the serve fleet test');

let redis: RedisServer | null = null;
const servers: RunningServer[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
  await redis?.stop();
  redis = null;
});

describe.skipIf(!haveRedis)('two servers sharing a remote tier', () => {
  it('a prompt served by one is served from the remote tier by the other', async () => {
    redis = await startRedis();
    const first = await startTestServer({ engine: { remote: redis.url } });
    servers.push(first);
    const second = await startTestServer({ engine: { remote: redis.url } });
    servers.push(second);
    const prompt = tokenPrompt(256, 42);
    const served = await openaiClient(first).completions.create({ model: 'tiny', prompt, max_tokens: 4 });
    expect(tokenIdsOf(served.choices[0])).toEqual(referenceOutput(prompt, 4));
    // Write-through: the first server's blocks reach the remote once its CPU-tier stores completed.
    await until(() => {
      const writes = first.serving.engine.metrics().remote?.writes;
      return writes !== undefined && writes.succeeded > 0 && writes.succeeded + writes.failed === writes.blocks && !first.serving.engine.hasPendingWork();
    }, 'the first server\'s remote writes');
    const again = await openaiClient(second).completions.create({ model: 'tiny', prompt, max_tokens: 4 });
    const cached = cachedOf(again.usage);
    expect(cached.cached_tokens).toBeGreaterThan(0);
    expect(cached.cached_tokens_by_tier).toEqual({ gpu: 0, cpu: 0, remote: cached.cached_tokens });
    expect(tokenIdsOf(again.choices[0])).toEqual(referenceOutput(prompt, 4));
  });
});
