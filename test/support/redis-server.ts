import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { freeLoopbackPort, waitForLoopbackPort } from '../../src/core/loopback-port.js';

/**
 * Real redis-server processes for the remote tier tests: each on a free
 * loopback port, with no persistence, stopped by the test that started it.
 */

const REDIS_SERVER = process.env.KVTIER_REDIS_SERVER ?? 'redis-server';
const REDIS_CLI = process.env.KVTIER_REDIS_CLI ?? 'redis-cli';

function onPath(command: string): boolean {
  return spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0;
}

export const haveRedis = onPath(REDIS_SERVER) && onPath(REDIS_CLI);

/** Logs the one line a skipped remote test file prints. */
export function noteRedisSkip(what: string): void {
  if (!haveRedis) console.log(`skipping ${what}: redis-server is missing (install it: apt-get install redis-server)`);
}

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Runs a redis-cli command against this server and returns its output. */
  cli(...args: string[]): string;
  stop(): Promise<void>;
}

export interface RedisServerOptions {
  /** e.g. '2mb': the server evicts keys (allkeys-lru) past it. */
  readonly maxmemory?: string;
  readonly password?: string;
  /** Start as a cluster node (config file in a temporary directory). */
  readonly clusterNode?: boolean;
  /** Reuse this port (a restart). */
  readonly port?: number;
  /** Serve TLS only, on the port, with this certificate and key (see selfSignedCertificate). */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
}

export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  const port = options.port ?? (await freeLoopbackPort());
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-redis-'));
  const listen = options.tls
    ? ['--port', '0', '--tls-port', String(port), '--tls-cert-file', options.tls.certFile, '--tls-key-file', options.tls.keyFile,
       '--tls-ca-cert-file', options.tls.certFile, '--tls-auth-clients', 'no']
    : ['--port', String(port)];
  const args = [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
  if (options.maxmemory) args.push('--maxmemory', options.maxmemory, '--maxmemory-policy', 'allkeys-lru');
  if (options.password) args.push('--requirepass', options.password);
  if (options.clusterNode) args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'));
  const child: ChildProcess = spawn(REDIS_SERVER, args, { stdio: 'ignore' });
  await waitForLoopbackPort(port, 5000, 'redis-server');
  const auth = options.password ? ['-a', options.password, '--no-auth-warning'] : [];
  const tls = options.tls ? ['--tls', '--cacert', options.tls.certFile] : [];
  const scheme = options.tls ? 'rediss' : 'redis';
  return {
    port,
    url: options.password ? `${scheme}://default:${options.password}@127.0.0.1:${port}` : `${scheme}://127.0.0.1:${port}`,
    cli: (...cliArgs) => {
      const out = spawnSync(REDIS_CLI, ['-p', String(port), ...tls, ...auth, ...cliArgs], { encoding: 'utf8' });
      return out.stdout;
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
      if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * For a test file whose tests start their own servers: call at the file's top
 * level; the function it returns starts a server, and each is stopped after
 * the test that started it.
 */
export function redisServersPerTest(): (options?: RedisServerOptions) => Promise<RedisServer> {
  const running: RedisServer[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.stop()));
  });
  return async (options = {}) => {
    const s = await startRedis(options);
    running.push(s);
    return s;
  };
}

export interface RedisCluster {
  readonly nodes: readonly RedisServer[];
  /** A seed URL: any node. */
  readonly url: string;
  stop(): Promise<void>;
}

/** Three masters on loopback ports, slots spread over them, no replicas. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const nodes = await Promise.all([0, 1, 2].map(() => startRedis({ clusterNode: true })));
  const created = spawnSync(
    REDIS_CLI,
    ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'],
    { encoding: 'utf8' },
  );
  if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
  const deadline = Date.now() + 10_000;
  while (!nodes.every((n) => /cluster_state:ok/.test(n.cli('cluster', 'info')))) {
    if (Date.now() > deadline) throw new Error('the cluster did not reach cluster_state:ok');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    nodes,
    url: nodes[0].url,
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

export const haveOpenssl = spawnSync('openssl', ['version'], { stdio: 'ignore' }).status === 0;

/** A self-signed certificate for 127.0.0.1 (openssl), in a fresh folder: its PEM files. */
export function selfSignedCertificate(): { certFile: string; keyFile: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-tls-'));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  const made = spawnSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1',
     '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
    { encoding: 'utf8' },
  );
  if (made.status !== 0) throw new Error(`openssl could not make a certificate: ${made.stderr}`);
  return { certFile, keyFile, dir };
}
