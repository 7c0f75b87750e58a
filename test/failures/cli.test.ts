import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';

/**
 * `kvtier run` as a user runs it, in a child process: a dead rank makes it
 * exit non-zero, quickly, with a line on stderr naming the rank; with
 * --rank-restart the same fault is survived.
 */

interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly wallMs: number;
}

/** Bound on a CLI run that loses a rank: catches a hang, not a slow run. */
const CLI_WALL_BOUND_MS = 30_000;

function runCli(args: readonly string[]): Promise<CliResult> {
  const started = performance.now();
  const child = spawn(process.execPath, [join(packageRoot(), 'dist', 'src', 'cli', 'main.js'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // A child that outlives the bound is killed, so a hang fails the test instead of stalling it.
  const killer = setTimeout(() => child.kill('SIGKILL'), CLI_WALL_BOUND_MS + 5_000);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stdout, stderr, wallMs: performance.now() - started });
    });
  });
}

const RUN = ['run', '--backend', 'host', '--tp', '2', '--requests', '16'];

describe('kvtier run losing a rank', () => {
  it('exits non-zero in bounded time with a stderr line naming the crashed rank', async () => {
    const result = await runCli([...RUN, '--faults', 'crash:rank=1,step=5']);
    expect(result.signal).toBeNull();
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/^kvtier: .*rank 1 failed: uncaught error: injected crash at step 5/m);
    expect(result.wallMs).toBeLessThan(CLI_WALL_BOUND_MS);
  });

  it('exits non-zero in bounded time when the rank hangs, naming the missed deadline', async () => {
    const result = await runCli([...RUN, '--faults', 'hang:rank=1,step=5', '--step-deadline-ms', '1500']);
    expect(result.signal).toBeNull();
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/^kvtier: .*rank 1 failed: missed the step deadline of 1500 ms at step 5/m);
    expect(result.wallMs).toBeLessThan(CLI_WALL_BOUND_MS);
  });

  it('with --rank-restart completes with every output verified', async () => {
    const result = await runCli([...RUN, '--rounds', '2', '--faults', 'crash:rank=1,step=5', '--rank-restart']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/rank restarts: 1/);
    expect(result.stdout).toMatch(/integrity: 16\/16/);
    expect(result.wallMs).toBeLessThan(CLI_WALL_BOUND_MS);
  });
});
