import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/report/report.js';
import { kvtier, scratchDir } from './cli.js';

/**
 * How a run starts and ends as a user sees it: a rank that hangs while
 * opening its device is bounded by --start-deadline-ms (also on a restart),
 * Ctrl-C or SIGTERM stop the run cleanly, requests failed by policy give
 * their own exit code, and each bench kind lists its options.
 */

const CLI = join(resolve(import.meta.dirname, '../..'), 'dist', 'src', 'cli', 'main.js');

interface Interrupted {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Starts `command args`, waits until its stderr shows the run's progress, then calls `send`. */
function interruptOnceRunning(command: string, args: readonly string[], send: (child: ReturnType<typeof spawn>) => void): Promise<Interrupted> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let sent = false;
    const sendOnceRunning = (text: string) => {
      if (!sent && text.includes('requests')) {
        sent = true;
        send(child);
      }
    };
    // The progress line is on stderr; under `script` a terminal carries both streams to stdout.
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => sendOnceRunning((stdout += chunk)));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => sendOnceRunning((stderr += chunk)));
    const limit = setTimeout(() => child.kill('SIGKILL'), 50_000);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(limit);
      done({ code, stdout, stderr });
    });
  });
}

/** The exit of `child`: its code, or the signal that killed it. */
function ended(child: ReturnType<typeof spawn>): Promise<Interrupted & { readonly signal: NodeJS.Signals | null }> {
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const limit = setTimeout(() => child.kill('SIGKILL'), 50_000);
  return new Promise((done, fail) => {
    child.on('error', fail);
    child.on('close', (code, signal) => {
      clearTimeout(limit);
      done({ code, signal, stdout, stderr });
    });
  });
}

/** The lines of `stderr` that kvtier itself wrote (not progress or logs). */
function kvtierLines(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line.startsWith('kvtier:'));
}

/** A run long enough to be interrupted mid-way. */
const LONG_RUN = ['run', '--requests', '400', '--compute-ns-per-token', '200000'];

describe.concurrent('start-up deadline', () => {
  it('a rank that hangs while opening its device fails the run at --start-deadline-ms, with a progress line meanwhile', async () => {
    // Long enough that the rank that does not hang opens in time on a loaded machine; the progress line comes at 2 s.
    const result = await kvtier(['run', '--requests', '2', '--faults', 'hang:rank=1,open=1', '--start-deadline-ms', '8000']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^opening the ranks' devices: [01]\/2 ready after [\d.]+ s \(a rank not ready within --start-deadline-ms 8000 is declared dead\)$/m);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^kvtier: rank 1 failed: did not open its device within 8000 ms/m);
  });

  it('a rank that hangs while reopening after a restart is bounded by the same deadline, and the run recovers', async () => {
    const json = join(scratchDir(), 'report.json');
    const result = await kvtier([
      'run', '--requests', '6', '--rank-restart', '--start-deadline-ms', '5000',
      '--faults', 'crash:rank=1,step=3;hang:rank=1,open=2', '--json', json,
    ]);
    // The restart is logged (warn level); nothing on stderr is an error of the run.
    expect(result.stderr).toMatch(/rank 1 restarted/);
    expect(result.stderr).not.toMatch(/^kvtier:/m);
    expect(result.code).toBe(0);
    const report = JSON.parse(readFileSync(json, 'utf8')) as RunReport;
    expect(report.rankRestarts).toBeGreaterThanOrEqual(1);
    expect(report.integrity.mismatches).toBe(0);
  });
});

describe.concurrent('signals', () => {
  it.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)('%s stops the ranks, prints one line, exits %i and writes no report', async (signal, code) => {
    const json = join(scratchDir(), 'report.json');
    const result = await interruptOnceRunning(process.execPath, [CLI, ...LONG_RUN, '--json', json], (child) => child.kill(signal));
    expect(result.code).toBe(code);
    const again = signal === 'SIGINT' ? 'Ctrl-C' : signal;
    // Besides progress lines, stderr holds one line saying what happened; stdout (the report's) stays empty.
    expect(kvtierLines(result.stderr)).toEqual([`kvtier: interrupted by ${signal}: stopping the ranks, no report is written (${again} again exits at once)`]);
    expect(result.stdout).toBe('');
    expect(existsSync(json)).toBe(false);
  });

  it('Ctrl-C while the program is still starting (reading its configuration) prints the interrupted line and exits 130', async () => {
    // The configuration is a FIFO: kvtier blocks reading it until the test writes, so the signal lands in start-up for sure.
    const dir = scratchDir();
    const config = join(dir, 'config.json');
    const json = join(dir, 'report.json');
    execFileSync('mkfifo', [config]);
    const child = spawn(process.execPath, [CLI, 'run', '--config', config, '--json', json], { stdio: ['ignore', 'pipe', 'pipe'] });
    const result = ended(child);
    // Opening the FIFO for writing completes once kvtier opened it for reading.
    const writer = await open(config, 'w');
    child.kill('SIGINT');
    await writer.writeFile(JSON.stringify({ requests: 4 })).catch(() => undefined);
    await writer.close().catch(() => undefined);
    const { code, signal, stderr } = await result;
    expect({ code, signal }).toEqual({ code: 130, signal: null });
    // Which words follow depends on how far start-up got before the signal was handled; it is one line either way.
    expect(kvtierLines(stderr)).toHaveLength(1);
    expect(kvtierLines(stderr)[0]).toMatch(/^kvtier: interrupted by SIGINT[ :]/);
    expect(existsSync(json)).toBe(false);
  });

  const hasScript = spawnSync('script', ['--version']).status === 0;
  it.skipIf(!hasScript)('Ctrl-C in a terminal turns line wrapping back on (install util-linux `script` to run this)', async () => {
    const line = [process.execPath, CLI, ...LONG_RUN].join(' ');
    const result = await interruptOnceRunning('script', ['-qfec', line, '/dev/null'], (child) => child.stdin!.write('\x03'));
    expect(result.code).toBe(130);
    // The progress line turned wrapping off (ESC[?7l); the last word on it must turn it back on (ESC[?7h).
    expect(result.stdout).toContain('\x1b[?7l');
    expect(result.stdout.lastIndexOf('\x1b[?7h')).toBeGreaterThan(result.stdout.lastIndexOf('\x1b[?7l'));
    expect(result.stdout).toMatch(/kvtier: interrupted by SIGINT/);
  });
});

describe.concurrent('exit codes and help', () => {
  it('a run whose requests failed under --failure-policy fail exits 3 with its report and one line saying why', async () => {
    const json = join(scratchDir(), 'report.json');
    const result = await kvtier(['run', '--requests', '24', '--gpu-blocks', '128', '--faults', 'load-fail:p=1', '--failure-policy', 'fail', '--log-level', 'error', '--json', json]);
    expect(result.code).toBe(3);
    expect(kvtierLines(result.stderr)).toEqual([expect.stringMatching(/^kvtier: the run finished, but \d+ request\(s\) ended with an error .*exit code 3\)$/)]);
    const report = JSON.parse(readFileSync(json, 'utf8')) as RunReport;
    expect(report.requests.failed).toBeGreaterThan(0);
    expect(report.integrity.mismatches).toBe(0);
    expect(result.stdout).toMatch(/kvtier run:/);
  });

  it.each([
    ['transfer', ['--block-tokens', '--total-bytes', '--tp', '--json', '--markdown']],
    ['e2e', ['--trace', '--cpu-blocks', '--token-scale', '--speedup']],
    ['scheduler', ['--running', '--steps', '--offload']],
  ])('bench %s --help lists its options and runs nothing', async (kind, flags) => {
    const result = await kvtier(['bench', kind, '--help']);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(new RegExp(`^Usage: kvtier bench ${kind} \\[options\\]`));
    for (const flag of flags) expect(result.stdout).toMatch(new RegExp(`^  ${flag} <`, 'm'));
  });
});
