import { parseCommandArgs } from '../../src/cli/command-parse.js';
import { createSweepCommand, sweepOptionsFromCommand, type SweepCommandOptions } from '../../src/cli/sweep-command.js';

/** `kvtier sweep`'s arguments (without program and command names), read as the command reads them. */
export function parseSweepArgs(argv: readonly string[]): SweepCommandOptions {
  return sweepOptionsFromCommand(parseCommandArgs(createSweepCommand(), argv));
}
