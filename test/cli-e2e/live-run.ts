import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * A `kvtier` child process watched while it runs: its output so far, a wait
 * for a line to appear, and its end. For tests that talk to a running CLI
 * (its /metrics endpoint), where cli.ts's kvtier() only sees the end.
 */

const REPO = resolve(import.meta.dirname, '../..');
const CLI = join(REPO, 'dist', 'src', 'cli', 'main.js');
const CHILD_LIMIT_MS = 60_000;

export class LiveCli {
  stdout = '';
  stderr = '';
  private readonly child: ChildProcess;
  private readonly exit: Promise<number | null>;
  private readonly waiters = new Set<() => void>();

  constructor(args: readonly string[]) {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build kvtier first (npm run build:ts)`);
    this.child = spawn(process.execPath, [CLI, ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), CHILD_LIMIT_MS);
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stdout += chunk;
      this.wake();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
      this.wake();
    });
    this.exit = new Promise((done) =>
      this.child.on('close', (code) => {
        clearTimeout(timer);
        this.wake();
        done(code);
      }),
    );
  }

  /** Resolves with the first match of `pattern` in stdout or stderr; rejects if the process ends first. */
  async waitFor(stream: 'stdout' | 'stderr', pattern: RegExp): Promise<RegExpMatchArray> {
    for (;;) {
      const match = this[stream].match(pattern);
      if (match !== null) return match;
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(`kvtier ended (${this.child.exitCode ?? this.child.signalCode}) before ${pattern} on ${stream}:\n${this.stderr}`);
      }
      await new Promise<void>((wake) => this.waiters.add(wake));
    }
  }

  /** Sends a signal and waits for the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    this.child.kill(signal);
    return this.exit;
  }

  async exited(): Promise<number | null> {
    return this.exit;
  }

  private wake(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }
}
