import { EXIT_INTERRUPTED } from './exit-codes.js';

/**
 * Ctrl-C (SIGINT) or SIGTERM during a run: the terminal is given back as it
 * was (the progress line turns line wrapping off while it draws), the ranks
 * are stopped, one line says what happened, and the process exits with 130 or
 * 143. No report is written: it would describe a run that did not finish.
 */

type InterruptSignal = keyof typeof EXIT_INTERRUPTED;
type Cleanup = () => void | Promise<void>;

/** How long cleanup may take before the process exits anyway. */
const CLEANUP_LIMIT_MS = 10_000;

export class RunInterrupts {
  private readonly cleanups: Cleanup[] = [];
  private wasInterrupted = false;
  private readonly handlers = new Map<InterruptSignal, () => void>();

  constructor(private readonly exit: (code: number) => void = (code) => process.exit(code)) {}

  /** true once a signal arrived: the run's own errors (its engine was shut down under it) are then not reported. */
  get interrupted(): boolean {
    return this.wasInterrupted;
  }

  /** Never settles: the interrupt handler ends the process once its cleanup is done (a timer keeps the process up until then). */
  async waitForExit(): Promise<never> {
    return new Promise<never>(() => {
      setInterval(() => undefined, 1000);
    });
  }

  /** Starts listening for SIGINT and SIGTERM (instead of Node's default of dying on the spot). */
  install(): void {
    for (const signal of Object.keys(EXIT_INTERRUPTED) as InterruptSignal[]) {
      const handler = (): void => void this.interrupt(signal);
      this.handlers.set(signal, handler);
      process.on(signal, handler);
    }
  }

  uninstall(): void {
    for (const [signal, handler] of this.handlers) process.off(signal, handler);
    this.handlers.clear();
  }

  /** Runs `cleanup` on an interrupt (latest first); returns a function that forgets it again. */
  onInterrupt(cleanup: Cleanup): () => void {
    this.cleanups.push(cleanup);
    return () => {
      const i = this.cleanups.indexOf(cleanup);
      if (i >= 0) this.cleanups.splice(i, 1);
    };
  }

  private async interrupt(signal: InterruptSignal): Promise<void> {
    const code = EXIT_INTERRUPTED[signal];
    // A second signal while cleaning up: stop waiting.
    if (this.wasInterrupted) return this.exit(code);
    this.wasInterrupted = true;
    const limit = setTimeout(() => this.exit(code), CLEANUP_LIMIT_MS);
    limit.unref();
    for (const cleanup of [...this.cleanups].reverse()) {
      try {
        await cleanup();
      } catch {
        // Keep going: the remaining cleanups and the exit matter more.
      }
    }
    clearTimeout(limit);
    process.stderr.write(`kvtier: interrupted by ${signal}: the ranks were stopped and no report was written\n`);
    this.exit(code);
  }
}

/**
 * Runs `body` with SIGINT/SIGTERM handled by a RunInterrupts. An error the
 * body throws after an interrupt (its engine was shut down under it) is not
 * reported: the interrupt handler prints its line and exits.
 */
export async function withInterrupts<T>(body: (interrupts: RunInterrupts) => Promise<T>): Promise<T> {
  const interrupts = new RunInterrupts();
  interrupts.install();
  try {
    return await body(interrupts);
  } catch (error) {
    if (interrupts.interrupted) return interrupts.waitForExit();
    throw error;
  } finally {
    if (!interrupts.interrupted) interrupts.uninstall();
  }
}
