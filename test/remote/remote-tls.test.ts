import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvtier } from '../cli-e2e/cli.js';
import { haveOpenssl, haveRedis, selfSignedCertificate, startRedis, type RedisServer } from '../support/redis-server.js';
import { asRequests, expectAllCorrect, prompts, remoteConfig, runEngineProcess } from './remote-helpers.js';

/**
 * The remote tier over TLS (`rediss://`) with a password, against a
 * redis-server serving TLS only with a self-signed certificate. Node trusts
 * it through NODE_EXTRA_CA_CERTS, as a user with a private CA would.
 */

const runnable = haveRedis && haveOpenssl;
if (!runnable) {
  console.log('skipping the remote tier over TLS: redis-server and openssl are needed (install them: apt-get install redis-server openssl)');
}

const PASSWORD = 'tls-s3cret';
const PROMPTS = prompts(1300, 4);

describe.skipIf(!runnable)('the remote tier over TLS', () => {
  let certificate: ReturnType<typeof selfSignedCertificate>;
  let server: RedisServer;

  beforeAll(async () => {
    certificate = selfSignedCertificate();
    server = await startRedis({ tls: certificate, password: PASSWORD });
  });

  afterAll(async () => {
    await server?.stop();
    if (certificate) rmSync(certificate.dir, { recursive: true, force: true });
  });

  it('shares prefixes between two engine processes through a rediss:// server that asks for a password', async () => {
    expect(server.url).toBe(`rediss://default:${PASSWORD}@127.0.0.1:${server.port}`);
    const trust = { NODE_EXTRA_CA_CERTS: certificate.certFile };
    const first = await runEngineProcess(remoteConfig(server.url), asRequests(PROMPTS, 'first'), {}, trust);
    const second = await runEngineProcess(remoteConfig(server.url), asRequests(PROMPTS, 'second', 16), {}, trust);
    expectAllCorrect(first, PROMPTS.length);
    expectAllCorrect(second, PROMPTS.length);
    expect(first.remote.writes.succeeded).toBeGreaterThan(0);
    expect(second.remote.hitTokens).toBe(PROMPTS.length * 128);
    // The values went over TLS: the server holds them, seen through a TLS client.
    expect(Number(server.cli('dbsize').trim())).toBeGreaterThan(0);
  });

  it('refuses a server whose certificate it cannot verify: exit 2, one line with the masked URL and the reason', async () => {
    const result = await kvtier(['run', '--remote', server.url, '--requests', '2', '--rounds', '1', '--log-level', 'error']);
    expect(result.code).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`rediss://default:***@127.0.0.1:${server.port}`);
    expect(lines[0]).toMatch(/certificate/);
    expect(result.stderr + result.stdout).not.toContain(PASSWORD);
  });

  it('serves a whole run over TLS from the command line, never printing the password', async () => {
    const result = await kvtier(['run', '--remote', server.url, '--requests', '4', '--rounds', '2', '--log-level', 'error'], {
      NODE_EXTRA_CA_CERTS: certificate.certFile,
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/remote writes: [1-9][0-9,]* blocks\s+0 failed/);
    expect(result.stdout).toMatch(/remote server: connected/);
    expect(result.stderr + result.stdout).not.toContain(PASSWORD);
  });
});
