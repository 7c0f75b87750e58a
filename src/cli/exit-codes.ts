import { CommanderError } from 'commander';
import { ConfigError, KvtierError, TraceError } from '../core/errors.js';
import { RemoteConfigError, RemoteUnavailableError } from '../remote/errors.js';
import { UsageError } from './usage-error.js';

/** The run finished and every check passed. */
export const EXIT_OK = 0;
/** The run failed: a rank died, an output differed from the reference, a block leaked, an output file could not be written. */
export const EXIT_RUN_FAILED = 1;
/** Bad input: nothing ran. */
export const EXIT_BAD_INPUT = 2;
/** The run finished and every served output matched, but some requests ended with an error (e.g. under --failure-policy fail). */
export const EXIT_REQUESTS_FAILED = 3;
/** Interrupted by a signal: 128 + the signal's number, as shells report it (defined beside the handlers, which the entry loads first). */
export { EXIT_INTERRUPTED } from './interrupt.js';

/**
 * How the CLI ends for an error: 2 for bad input (flags, config file, trace
 * lines) with one `kvtier: <message>` line, 0 after help or version output,
 * 1 for failures of the run itself.
 */
export interface CliExit {
  readonly code: number;
  /** The line to print on stderr, or null when commander already printed what it had to. */
  readonly message: string | null;
}

/** Commander's message without its "error:" prefix, its suggestion ("(Did you mean ...?)") kept on the same line. */
export function commanderMessage(err: CommanderError): string {
  return err.message.replace(/^error:\s*/, '').replace(/\s*\n\s*/g, ' ');
}

export function cliExitFor(err: unknown): CliExit {
  if (err instanceof CommanderError) {
    // 'commander.help' after a bare `kvtier`: the help text was the message.
    if (err.exitCode === 0 || err.code === 'commander.help') return { code: err.exitCode === 0 ? 0 : 2, message: null };
    return { code: 2, message: `kvtier: ${commanderMessage(err)}` };
  }
  if (
    err instanceof UsageError ||
    err instanceof ConfigError ||
    err instanceof TraceError ||
    err instanceof RemoteConfigError ||
    err instanceof RemoteUnavailableError
  ) {
    return { code: 2, message: `kvtier: ${err.message}` };
  }
  if (err instanceof KvtierError) return { code: 1, message: `kvtier: ${err.message} (${err.code})` };
  const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
  return { code: 1, message: `kvtier: unexpected failure: ${message}` };
}
