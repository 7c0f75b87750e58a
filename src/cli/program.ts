import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { analyzeCommand, analyzeOptionsFromCommand, createAnalyzeCommand } from './analyze-command.js';
import { benchCommand } from './bench.js';
import { cliExitFor } from './exit-codes.js';
import { releaseCliInterrupts } from './interrupt.js';
import { looseFlagInput } from './config-input.js';
import { packageRoot } from '../core/package-root.js';
import { runCommand } from './run.js';
import { runConfigFromCommand } from './run-config.js';
import { createRunCommand } from './run-flags.js';
import { serveCommand } from './serve-command.js';
import { serveConfigFromCommand } from './serve-config.js';
import { createServeCommand } from './serve-flags.js';
import { createSweepCommand, sweepCommand, sweepOptionsFromCommand } from './sweep-command.js';

/** The `kvtier` command line: run, serve, analyze, sweep, bench (main.ts loads it once the signal handlers are in place). */

/** Commander prints help itself; errors are printed once, by cliExitFor's caller. */
function quietErrors(command: Command): Command {
  return command.exitOverride().configureOutput({ outputError: () => {} });
}

function version(): string {
  const manifest = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: string };
  return manifest.version ?? 'unknown';
}

async function main(argv: readonly string[]): Promise<number> {
  let exitCode = 0;
  const program = quietErrors(
    new Command('kvtier')
      .description('LLM-style serving runtime with a paged KV cache, prefix caching and a CPU offload tier')
      .version(version()),
  );
  // `run` keeps the entry's SIGINT/SIGTERM handling for its whole run; the other commands hand the signals back.
  program.hook('preAction', (_program, action) => {
    if (action.name() !== 'run') releaseCliInterrupts();
  });
  program.addCommand(
    quietErrors(createRunCommand()).action(async (_options: unknown, command: Command) => {
      exitCode = await runCommand(runConfigFromCommand(command));
    }),
  );
  program.addCommand(
    quietErrors(createServeCommand()).action(async (_options: unknown, command: Command) => {
      exitCode = await serveCommand(serveConfigFromCommand(command));
    }),
  );
  program.addCommand(
    quietErrors(createAnalyzeCommand()).action(async (_options: unknown, command: Command) => {
      exitCode = await analyzeCommand(analyzeOptionsFromCommand(command));
    }),
  );
  program.addCommand(
    quietErrors(createSweepCommand()).action(async (_options: unknown, command: Command) => {
      exitCode = await sweepCommand(sweepOptionsFromCommand(command));
    }),
  );
  program.addCommand(
    quietErrors(new Command('bench'))
      .description('benchmarks: transfer (GB/s vs a contiguous copy), scheduler (CPU time per step), overlap (forward time with transfers), e2e (a trace slice with offload off and on), remote (remote tier GB/s vs plain SET/GET), gpu (the GPU path checked in one command, goals met or not)')
      .argument('<kind>', 'which benchmark (e.g. transfer, scheduler); `kvtier bench <kind> --help` lists its options')
      // A kind's options belong to the kind: `bench transfer --help` reaches benchCommand, which lists them.
      .helpOption(false)
      .allowUnknownOption()
      .allowExcessArguments()
      .action(async (kind: string, _options: unknown, command: Command) => {
        if (kind === '--help' || kind === '-h') {
          command.outputHelp();
          return;
        }
        const args = command.args.slice(1).map((arg) => (arg === '-h' ? '--help' : arg));
        exitCode = await benchCommand(kind, looseFlagInput(args));
      }),
  );
  await program.parseAsync(argv as string[], { from: 'user' });
  return exitCode;
}

/** Runs the command line `argv` (without node and the script) and ends the process with its exit code. */
export function runCli(argv: readonly string[]): void {
  main(argv).then(
    (code) => finish(code),
    (err: unknown) => {
      const exit = cliExitFor(err);
      if (exit.message !== null) process.stderr.write(`${exit.message}\n`);
      finish(exit.code);
    },
  );
}

/** Lets output drain, but never lets a stray handle keep a finished CLI alive. */
function finish(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), 2000).unref();
}
