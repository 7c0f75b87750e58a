import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scratchFile } from '../cli-e2e/cli.js';
import { haveRedis, noteRedisSkip } from '../support/redis-server.js';

/**
 * The private redis-server that `bench remote` and `bench share` start
 * without --url lives no longer than the bench: a SIGINT or SIGTERM to the
 * bench kills it too, instead of leaving it running under init.
 */

noteRedisSkip('the bench server lifetime tests');

const CLI = join(resolve(import.meta.dirname, '../..'), 'dist', 'src', 'cli', 'main.js');

/** A trace long enough that the share bench is still running when it is signalled. */
function longTrace(): string {
  const lines = Array.from({ length: 600 }, (_, i) =>
    JSON.stringify({ timestamp: i * 10, input_length: 2048, output_length: 16, hash_ids: [1, 2, 3, i + 10] }),
  );
  return scratchFile('trace.jsonl', `${lines.join('\n')}\n`);
}

/** The pids of `parent`'s redis-server children. */
function redisChildren(parent: number): number[] {
  const out = spawnSync('ps', ['-o', 'pid=,comm=', '--ppid', String(parent)], { encoding: 'utf8' }).stdout;
  return out.split('\n').map((l) => l.trim().split(/\s+/)).filter(([, comm]) => comm === 'redis-server').map(([pid]) => Number(pid));
}

/** A process is gone once no such pid exists, or it is a zombie left for init to reap. */
function gone(pid: number): boolean {
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

/** Polls `check` every 50 ms until it holds (or `limitMs` passed); returns whether it held. */
async function eventually(check: () => boolean, limitMs: number): Promise<boolean> {
  for (let waited = 0; waited < limitMs; waited += 50) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

/** Signals the bench once its server runs; how it ended, and whether its server was gone soon after (before any cleanup here). */
async function signalledBench(args: readonly string[], signal: 'SIGINT' | 'SIGTERM'): Promise<{ readonly serverGone: boolean; readonly exit: { code: number | null; signal: string | null } }> {
  const bench: ChildProcess = spawn(process.execPath, [CLI, 'bench', ...args], { stdio: 'ignore' });
  const exited = new Promise<{ code: number | null; signal: string | null }>((done) => bench.once('exit', (code, sig) => done({ code, signal: sig })));
  let server = 0;
  try {
    expect(await eventually(() => (server = redisChildren(bench.pid!)[0] ?? 0) > 0, 30_000)).toBe(true);
    bench.kill(signal);
    const exit = await exited;
    return { exit, serverGone: await eventually(() => gone(server), 10_000) };
  } finally {
    bench.kill('SIGKILL');
    if (server > 0 && !gone(server)) process.kill(server, 'SIGKILL');
  }
}

describe.skipIf(!haveRedis)('a bench\'s private redis-server', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('dies with bench remote on %s, which still ends the bench', async (signal) => {
    const { serverGone, exit } = await signalledBench(['remote', '--backend', 'host', '--models', 'tiny', '--total-bytes', '1MiB', '--repeats', '100000'], signal);
    expect(exit.signal).toBe(signal);
    expect(serverGone).toBe(true);
  }, 60_000);

  it('dies with bench share on SIGTERM', async () => {
    const { serverGone, exit } = await signalledBench(['share', '--backend', 'host', '--trace', longTrace(), '--max-requests', '600'], 'SIGTERM');
    expect(exit.signal).toBe('SIGTERM');
    expect(serverGone).toBe(true);
  }, 60_000);
});
