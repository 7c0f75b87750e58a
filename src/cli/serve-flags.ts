import { Command } from 'commander';
import { DEFAULT_MAX_WAITING } from '../serve/serving-engine.js';
import { DEFAULT_SERVE_HOST, DEFAULT_SERVE_PORT } from '../serve/serve-app.js';
import { createRunCommand } from './run-flags.js';

/**
 * The flags of `kvtier serve`: every engine flag of `kvtier run` (the same
 * Option objects, so help, names and checks are shared), without the ones
 * that describe a replayed workload or its report, plus the server's own.
 */

/** `kvtier run` settings that belong to a replay or its report, not to a server. */
export const RUN_ONLY_KEYS: readonly string[] = [
  'workload',
  'requests',
  'rounds',
  'seed',
  'trace',
  'maxRequests',
  'timeWindow',
  'tokenScale',
  'speedup',
  'arrivals',
  'compare',
  'json',
  'html',
  'metricsPort',
  'metricsHost',
  'metricsLingerMs',
];

export const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;

export function createServeCommand(): Command {
  const serve = new Command('serve').description(
    'serve the engine over HTTP with an OpenAI-compatible API: POST /v1/completions (prompt as text or token ids, stream, seed, cache_salt), GET /v1/models, /health, /metrics',
  );
  for (const option of createRunCommand().options) {
    if (!RUN_ONLY_KEYS.includes(option.attributeName())) serve.addOption(option);
  }
  return serve
    .option('--host <host>', `address to listen on (default ${DEFAULT_SERVE_HOST})`)
    .option('--port <port>', `port to listen on; 0: any free port (default ${DEFAULT_SERVE_PORT})`)
    .option('--served-model-name <name>', 'the model name clients send and /v1/models lists (default: the --model preset)')
    .option('--max-waiting <n>', `most requests waiting for their first token; more are refused with 429 (default ${DEFAULT_MAX_WAITING})`)
    .option('--drain-timeout-ms <ms>', `on SIGTERM or SIGINT: how long requests in flight may take to finish before they are aborted (default ${DEFAULT_DRAIN_TIMEOUT_MS})`)
    .option('--stream-interval <tokens>', 'fewest tokens per server-sent event of a streamed completion (the last may carry fewer; tokens that reach the server together share an event); more mean fewer socket writes and later tokens (default 1)')
    .option(
      '--http-thread <on|off>',
      'on: the HTTP server (parsing, tokenizing, server-sent events, socket writes) runs on a front-end thread of its own, fed tokens through shared memory, so it costs the scheduler\'s thread almost nothing per step; off: it runs on the main thread beside the scheduler (default on)',
    )
    .option('--verify', 'check every finished request against the reference model; mismatches are logged and counted in /metrics')
    .allowExcessArguments(false);
}
