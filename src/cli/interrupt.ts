/**
 * Ctrl-C (SIGINT) or SIGTERM during a run: one line on stderr says so at
 * once, the terminal is given back as it was (the progress line turns line
 * wrapping off while it draws), the ranks are stopped, and the process exits
 * with 130 or 143. No report is written: it would describe a run that did
 * not finish. A second signal while the ranks are being stopped exits at
 * once.
 *
 * The CLI entry installs the handlers before it loads anything else
 * (installCliInterrupts), so a signal during start-up (loading the program,
 * reading the configuration) gets the same line and code instead of Node's
 * silent default.
 */

/** Exit code for an interrupted run: 128 + the signal's number, as shells report it (listed with the others in exit-codes.ts). */
export const EXIT_INTERRUPTED = { SIGINT: 130, SIGTERM: 143 } as const;

export type InterruptSignal = keyof typeof EXIT_INTERRUPTED;
type Cleanup = () => void | Promise<void>;

/** How long cleanup may take before the process exits anyway. */
const CLEANUP_LIMIT_MS = 10_000;

export interface InterruptOutput {
  /** Ends the process. */
  readonly exit: (code: number) => void;
  /** Writes one line (with its newline) to stderr. */
  readonly write: (line: string) => void;
}

const PROCESS_OUTPUT: InterruptOutput = {
  exit: (code) => process.exit(code),
  write: (line) => void process.stderr.write(line),
};

/** What a user types for a second signal. */
function again(signal: InterruptSignal): string {
  return signal === 'SIGINT' ? 'Ctrl-C' : signal;
}

export class RunInterrupts {
  private readonly cleanups: Cleanup[] = [];
  private wasInterrupted = false;
  private readonly handlers = new Map<InterruptSignal, () => void>();

  constructor(private readonly output: InterruptOutput = PROCESS_OUTPUT) {}

  /** true once a signal arrived: the run's own errors (its engine was shut down under it) are then not reported. */
  get interrupted(): boolean {
    return this.wasInterrupted;
  }

  /** true while SIGINT and SIGTERM are handled here. */
  get installed(): boolean {
    return this.handlers.size > 0;
  }

  /** Never settles: the interrupt handler ends the process once its cleanup is done (a timer keeps the process up until then). */
  async waitForExit(): Promise<never> {
    return new Promise<never>(() => {
      setInterval(() => undefined, 1000);
    });
  }

  /** Starts listening for SIGINT and SIGTERM (instead of Node's default of dying on the spot). */
  install(): void {
    if (this.installed) return;
    for (const signal of Object.keys(EXIT_INTERRUPTED) as InterruptSignal[]) {
      const handler = (): void => void this.deliver(signal);
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

  /** What a delivered signal does (install() routes SIGINT and SIGTERM here); settles once the process was told to exit. */
  async deliver(signal: InterruptSignal): Promise<void> {
    const code = EXIT_INTERRUPTED[signal];
    const { exit, write } = this.output;
    if (this.wasInterrupted) {
      write(`kvtier: interrupted again by ${signal}: exiting without waiting for the ranks to stop\n`);
      return exit(code);
    }
    this.wasInterrupted = true;
    if (this.cleanups.length === 0) {
      write(`kvtier: interrupted by ${signal} before the run started: nothing was written\n`);
      return exit(code);
    }
    // Said before the ranks are stopped, which can take a while: the user sees at once that the signal arrived.
    write(`kvtier: interrupted by ${signal}: stopping the ranks, no report is written (${again(signal)} again exits at once)\n`);
    const limit = setTimeout(() => {
      write(`kvtier: the ranks did not stop within ${CLEANUP_LIMIT_MS / 1000} s: exiting without them\n`);
      exit(code);
    }, CLEANUP_LIMIT_MS);
    limit.unref();
    for (const cleanup of [...this.cleanups].reverse()) {
      try {
        await cleanup();
      } catch {
        // Keep going: the remaining cleanups and the exit matter more.
      }
    }
    clearTimeout(limit);
    exit(code);
  }
}

/** The handlers the CLI entry installed, or null (library use, tests). */
let cliInterrupts: RunInterrupts | null = null;

/**
 * Installs the process's SIGINT/SIGTERM handling; the CLI entry calls it
 * before it loads the rest of the program. `run` keeps it for the run
 * (withInterrupts); other commands hand the signals back (releaseCliInterrupts).
 */
export function installCliInterrupts(): RunInterrupts {
  cliInterrupts ??= new RunInterrupts();
  cliInterrupts.install();
  return cliInterrupts;
}

/** Gives the signals back to Node's default (or the command's own handlers): for commands other than `run`. */
export function releaseCliInterrupts(): void {
  if (cliInterrupts !== null && !cliInterrupts.interrupted) cliInterrupts.uninstall();
}

/**
 * Runs `body` with SIGINT/SIGTERM handled by a RunInterrupts (the CLI's own
 * when installed). An error the body throws after an interrupt (its engine
 * was shut down under it) is not reported: the interrupt handler prints its
 * line and exits. After the body the signals are handed back.
 */
export async function withInterrupts<T>(body: (interrupts: RunInterrupts) => Promise<T>): Promise<T> {
  const interrupts = cliInterrupts !== null && cliInterrupts.installed ? cliInterrupts : new RunInterrupts();
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
