import type { Command } from 'commander';
import { z } from 'zod';
import { flagInput, mergeInputs, originOf, parseInput, readConfigFile, rejectStringNumbers, type LayeredInput, type ValueOrigin } from './config-input.js';
import { flag, nonEmptyString, nonNegativeInt, oneOf, positiveInt } from './field-schemas.js';
import { buildRunConfig, type RunConfig } from './run-config.js';
import { port } from './run-monitoring-config.js';
import { DEFAULT_DRAIN_TIMEOUT_MS, RUN_ONLY_KEYS } from './serve-flags.js';
import { UsageError } from './usage-error.js';
import { DEFAULT_MAX_WAITING } from '../serve/serving-engine.js';
import { DEFAULT_SERVE_HOST, DEFAULT_SERVE_PORT } from '../serve/serve-app.js';

/**
 * `kvtier serve`'s settings, from flags or a config file (flags win), read
 * by the same layers as `kvtier run`: the engine's settings go through
 * run's own validation (buildRunConfig), the server's through the schema
 * below, and run's replay-only keys are refused naming where they came from.
 */

const serveInputSchema = z
  .object({
    host: nonEmptyString('a host name or IP address to listen on'),
    port: port(),
    servedModelName: nonEmptyString('a model name'),
    maxWaiting: positiveInt(1_000_000),
    drainTimeoutMs: nonNegativeInt(3_600_000),
    streamInterval: positiveInt(4096),
    verify: flag(),
    httpThread: oneOf(['on', 'off'] as const),
  })
  .partial()
  .strict();

const SERVE_KEYS = Object.keys(serveInputSchema.shape);
const SERVE_NUMBER_KEYS = ['port', 'maxWaiting', 'drainTimeoutMs', 'streamInterval'];
const PATH_KEYS = ['remoteSecretFile'] as const;

export interface ServeConfig {
  /** The engine's settings, as `kvtier run` reads them (its workload fields unused). */
  readonly run: RunConfig;
  readonly host: string;
  readonly port: number;
  /** null: the model preset's name. */
  readonly servedModelName: string | null;
  readonly maxWaiting: number;
  readonly drainTimeoutMs: number;
  readonly streamInterval: number;
  readonly verify: boolean;
  /** The HTTP server on a front-end thread (true, the default) or on the main thread. */
  readonly httpThread: boolean;
}

export function serveConfigFromCommand(command: Command): ServeConfig {
  const flags = flagInput(command, ['config']);
  const configFile = command.opts().config as string | undefined;
  return buildServeConfig(configFile === undefined ? flags : mergeInputs(readConfigFile(configFile, PATH_KEYS), flags));
}

export function buildServeConfig(input: LayeredInput): ServeConfig {
  for (const key of RUN_ONLY_KEYS) {
    if (input.values[key] !== undefined) throw new UsageError(`${originOf(input, key)} applies to \`kvtier run\` only: a server takes its requests over HTTP`);
  }
  const serveInput = pick(input, (key) => SERVE_KEYS.includes(key));
  rejectStringNumbers(serveInput, SERVE_NUMBER_KEYS);
  const given = parseInput(serveInputSchema, serveInput);
  return {
    run: buildRunConfig(pick(input, (key) => !SERVE_KEYS.includes(key))),
    host: given.host ?? DEFAULT_SERVE_HOST,
    port: given.port ?? DEFAULT_SERVE_PORT,
    servedModelName: given.servedModelName ?? null,
    maxWaiting: given.maxWaiting ?? DEFAULT_MAX_WAITING,
    drainTimeoutMs: given.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS,
    streamInterval: given.streamInterval ?? 1,
    verify: given.verify ?? false,
    httpThread: (given.httpThread ?? 'on') === 'on',
  };
}

function pick(input: LayeredInput, keep: (key: string) => boolean): LayeredInput {
  const values: Record<string, unknown> = {};
  const origins = new Map<string, ValueOrigin>();
  for (const [key, value] of Object.entries(input.values)) {
    if (!keep(key)) continue;
    values[key] = value;
    const origin = input.origins.get(key);
    if (origin !== undefined) origins.set(key, origin);
  }
  return { values, origins };
}
