import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import type { z } from 'zod';
import { UsageError } from './usage-error.js';

/**
 * Command input from two layers, a JSON config file and flags (flags win),
 * validated by one zod object schema. Every value remembers where it came
 * from, so an error names the flag (`--tp`) or the file and key that set it.
 * Config file keys are the flags' camelCase names (`--gpu-blocks` ->
 * "gpuBlocks"; `--no-offload` -> "offload": false).
 */

export type ValueOrigin = { readonly kind: 'flag'; readonly flag: string } | { readonly kind: 'file'; readonly file: string; readonly key: string };

export interface LayeredInput {
  readonly values: Readonly<Record<string, unknown>>;
  readonly origins: ReadonlyMap<string, ValueOrigin>;
}

/** Where `key`'s value came from: "--tp" or 'key "tp" in run.json'. */
export function originOf(input: LayeredInput, key: string): string {
  const origin = input.origins.get(key);
  if (origin === undefined) return `"${key}"`;
  return origin.kind === 'flag' ? origin.flag : `key "${origin.key}" in ${origin.file}`;
}

/** Rejects two settings that must not both be given, e.g. --cpu-blocks and --cpu-bytes. */
export function rejectBoth(input: LayeredInput, first: string, second: string, whatTheyDo: string): void {
  if (input.values[first] !== undefined && input.values[second] !== undefined) {
    throw new UsageError(`${originOf(input, first)} and ${originOf(input, second)} both ${whatTheyDo}; give one`);
  }
}

/** A UsageError naming where `key`'s value came from. */
export function invalidValue(input: LayeredInput, key: string, message: string): UsageError {
  const origin = input.origins.get(key);
  const value = input.values[key];
  const shown = origin?.kind === 'flag' && typeof value === 'string' ? JSON.stringify(value) : truncate(JSON.stringify(value) ?? String(value));
  return new UsageError(`${originOf(input, key)}: invalid value ${shown}: ${message}`);
}

/**
 * Reads a JSON config file holding one object. Keys in `pathKeys` hold file
 * paths; relative ones are taken relative to the config file's folder.
 */
export function readConfigFile(file: string, pathKeys: readonly string[] = []): LayeredInput {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--config ${file}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--config ${file}: invalid JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(`--config ${file}: expected a JSON object of settings`);
  }
  const values: Record<string, unknown> = { ...(parsed as Record<string, unknown>) };
  const origins = new Map<string, ValueOrigin>();
  for (const key of Object.keys(values)) {
    origins.set(key, { kind: 'file', file, key });
    if (pathKeys.includes(key) && typeof values[key] === 'string' && values[key] !== '') {
      values[key] = resolve(dirname(file), values[key] as string);
    }
  }
  return { values, origins };
}

/** The values of the options given on the command line (not defaults), by attribute name. */
export function flagInput(command: Command, exclude: readonly string[] = []): LayeredInput {
  const values: Record<string, unknown> = {};
  const origins = new Map<string, ValueOrigin>();
  const given = command.opts();
  for (const option of command.options) {
    const key = option.attributeName();
    if (exclude.includes(key) || command.getOptionValueSource(key) !== 'cli') continue;
    values[key] = given[key];
    origins.set(key, { kind: 'flag', flag: option.long ?? option.flags });
  }
  return { values, origins };
}

/** Layers later in the list override earlier ones. */
export function mergeInputs(...layers: readonly LayeredInput[]): LayeredInput {
  const values: Record<string, unknown> = {};
  const origins = new Map<string, ValueOrigin>();
  for (const layer of layers) {
    Object.assign(values, layer.values);
    for (const [key, origin] of layer.origins) origins.set(key, origin);
  }
  return { values, origins };
}

/** Validates the merged input against a strict object schema; the first problem becomes a UsageError. */
export function parseInput<S extends z.ZodType>(schema: S, input: LayeredInput): z.output<S> {
  const result = schema.safeParse(input.values);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0];
    const origin = input.origins.get(key);
    const where = origin?.kind === 'file' ? `${origin.file}: ` : '';
    throw new UsageError(`${where}unknown key "${key}" (keys are the flags' camelCase names, e.g. "gpuBlocks")`);
  }
  const key = String(issue.path[0] ?? '');
  throw invalidValue(input, key, issue.message);
}

function truncate(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
