import { spawn, type ChildProcess } from 'node:child_process';
import { freeLoopbackPort, waitForLoopbackPort } from '../core/loopback-port.js';

/**
 * A redis-server of a bench's own, on a free loopback port, without
 * persistence. It lives no longer than the bench: stopped when the bench
 * ends, and killed when the process exits or is ended by SIGINT, SIGTERM or
 * SIGHUP (which would otherwise leave it running, adopted by init).
 */

export interface PrivateServer {
  readonly port: number;
  stop(): Promise<void>;
}

const FATAL_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export async function startPrivateServer(what = 'bench remote'): Promise<PrivateServer> {
  const port = await freeLoopbackPort();
  // Watched before it is spawned: a signal that arrives while spawn() runs (the server already exec'd) is
  // handled once spawn returns, instead of ending this process by default and leaving the server behind.
  let spawned: ChildProcess | null = null;
  const release = killWithParent(() => spawned);
  const child: ChildProcess = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  spawned = child;
  const failed = new Promise<never>((_, reject) => {
    child.once('error', () => reject(new Error('redis-server was not found (install it: apt-get install redis-server), or pass --url')));
  });
  try {
    await waitForLoopbackPort(port, 5000, 'redis-server', failed);
  } catch (error) {
    child.kill('SIGKILL');
    release();
    throw new Error(`${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return {
    port,
    stop: async () => {
      release();
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * Kills the child `current` names (none yet: nothing to kill) when this
 * process exits or a fatal signal arrives. A signal that nothing else in the
 * process listens for is then raised again, so the process still ends as the
 * signal would have ended it. Returns a function that stops watching.
 */
function killWithParent(current: () => ChildProcess | null): () => void {
  const kill = (): void => {
    const child = current();
    if (child !== null && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  const handlers = new Map<NodeJS.Signals, () => void>();
  const release = (): void => {
    process.off('exit', kill);
    for (const [signal, handler] of handlers) process.off(signal, handler);
    handlers.clear();
  };
  for (const signal of FATAL_SIGNALS) {
    const handler = (): void => {
      kill();
      release();
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    handlers.set(signal, handler);
    process.on(signal, handler);
  }
  process.on('exit', kill);
  return release;
}
