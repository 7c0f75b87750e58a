import { CommanderError, type Command } from 'commander';
import { commanderMessage } from './exit-codes.js';
import { UsageError } from './usage-error.js';

/**
 * Commander reports bad flags by printing and exiting; the CLI wants one
 * `kvtier: <message>` line and exit code 2 instead, so parse errors become
 * UsageErrors. Help and version output (exit code 0) pass through unchanged.
 */
export function asUsageError(err: unknown): unknown {
  if (err instanceof CommanderError && err.exitCode !== 0) {
    return new UsageError(commanderMessage(err), { cause: err });
  }
  return err;
}

/** Parses user arguments (no program or command name) into `command`, throwing instead of exiting. */
export function parseCommandArgs(command: Command, argv: readonly string[]): Command {
  command.exitOverride().configureOutput({ writeErr: () => {} });
  try {
    command.parse(argv as string[], { from: 'user' });
  } catch (err) {
    throw asUsageError(err);
  }
  return command;
}
