import { afterEach, describe, expect, it } from 'vitest';
import { haveRedis, noteRedisSkip, startRedis, type RedisServer } from '../support/redis-server.js';
import { asRequests, expectAllCorrect, prompts, remoteConfig, runEngine, type RemoteRun } from './remote-helpers.js';

/**
 * When a waiting request asks the remote. A request deep in the queue is
 * asked when it nears admission, not when it arrives: its answer then covers
 * blocks written while it waited, here by a request ahead of it whose blocks
 * have left the GPU and the CPU tier since.
 */

noteRedisSkip('the remote lookahead tests');

let running: RedisServer | null = null;
afterEach(async () => {
  await running?.stop();
  running = null;
});

const SHARED = prompts(5_100, 1)[0];
const FILLERS = prompts(5_200, 40);

/**
 * One engine, an empty server, everything queued at once: the first request
 * computes SHARED, forty others flush it out of a 32-block GPU and a 16-block
 * CPU tier, and the last one asks for SHARED again.
 */
async function laterTurnBehindALongQueue(): Promise<RemoteRun> {
  running = await startRedis();
  const requests = [...asRequests([SHARED], 'first'), ...asRequests(FILLERS, 'filler'), ...asRequests([SHARED], 'later', 16)];
  return runEngine(remoteConfig(running.url, { gpuBlocks: 32, cpuBlocks: 16 }), requests);
}

describe.skipIf(!haveRedis)('remote lookups of queued requests', () => {
  it('a request far back in the queue hits, from the remote, the blocks written while it waited', async () => {
    const run = await laterTurnBehindALongQueue();
    expectAllCorrect(run, FILLERS.length + 2);
    const later = run.finished.find((f) => f.id === 'later0');
    expect(later?.gpuPrefixHitTokens).toBe(0);
    expect(later?.cpuTierHitTokens).toBe(SHARED.length);
    expect(later?.remoteHitTokens).toBe(SHARED.length);
    expect(run.remote.servedTokens).toBeGreaterThanOrEqual(SHARED.length);
  }, 60_000);
});
