import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EngineLogger } from '../../src/log/engine-events.js';
import { haveRedis, noteRedisSkip, startRedis, type RedisServer } from '../support/redis-server.js';
import { withEngine } from '../e2e/helpers.js';
import { remoteConfig } from './remote-helpers.js';

/**
 * The client library's own warnings (a password given to a server that needs
 * none) reach the engine's logger, once, instead of raw lines on stderr that
 * ignore the log level and break JSON logs.
 */

noteRedisSkip('the remote client warning tests');

const servers: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  vi.restoreAllMocks();
});

describe.skipIf(!haveRedis)("the remote client's warnings", () => {
  it('go to the engine logger once, and not to the console', async () => {
    const s = await startRedis();
    servers.push(s);
    const console = vi.spyOn(globalThis.console, 'warn').mockImplementation(() => {});
    const warnings: string[] = [];
    const logger: EngineLogger = { debug: () => {}, info: () => {}, error: () => {}, warn: (_fields, message) => warnings.push(message) };
    await withEngine(remoteConfig(`redis://:unneeded@127.0.0.1:${s.port}`), async () => {}, { logger });
    expect(warnings).toEqual([expect.stringMatching(/^remote tier: .*does not require a password/)]);
    expect(console.mock.calls.filter(([first]) => String(first).startsWith('[WARN]'))).toEqual([]);
  }, 60_000);
});
