import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { isMap, isScalar, LineCounter, parseDocument } from 'yaml';
import type { z } from 'zod';
import { describeConfigIssue, invalidSetting, issueFromZod, showValue, type ConfigIssue, type SettingNaming } from '../config/issues.js';
import { jsonErrorSummary, printable, withoutBom } from '../core/safe-text.js';
import { canonicalPath } from './output-file.js';
import { UsageError } from './usage-error.js';

/**
 * Command input from two layers, a config file (JSON or YAML) and flags (flags win),
 * validated by one zod object schema. Every value remembers where it came
 * from, so an error names the flag (`--tp`) or the file and key that set it.
 * Config file keys are the flags' camelCase names (`--gpu-blocks` ->
 * "gpuBlocks"; `--no-offload` -> "offload": false).
 */

export type ValueOrigin =
  | { readonly kind: 'flag'; readonly flag: string }
  /** `line`: where a YAML file sets the key (1-based); null when not known (JSON). */
  | { readonly kind: 'file'; readonly file: string; readonly key: string; readonly line?: number | null };

export interface LayeredInput {
  readonly values: Readonly<Record<string, unknown>>;
  readonly origins: ReadonlyMap<string, ValueOrigin>;
}

/** Where `key`'s value came from: "--tp", 'key "tp" in run.json' or 'key "tp" in run.yaml:3'. */
export function originOf(input: LayeredInput, key: string): string {
  const origin = input.origins.get(key);
  if (origin === undefined) return `"${key}"`;
  if (origin.kind === 'flag') return origin.flag;
  return `key "${origin.key}" in ${origin.file}${origin.line == null ? '' : `:${origin.line}`}`;
}

/** Rejects two settings that must not both be given, e.g. --cpu-blocks and --cpu-bytes. */
export function rejectBoth(input: LayeredInput, first: string, second: string, whatTheyDo: string): void {
  if (input.values[first] !== undefined && input.values[second] !== undefined) {
    throw new UsageError(`${originOf(input, first)} and ${originOf(input, second)} both ${whatTheyDo}; give one`);
  }
}

/**
 * How messages name layered settings: by the flag or the file and key that
 * set them, with the value as given.
 */
export function layeredNaming(input: LayeredInput): SettingNaming {
  return {
    where: (path) => originOf(input, path[0] ?? ''),
    shown: (path) => {
      const key = path[0] ?? '';
      const value = input.values[key];
      if (value === undefined) return undefined;
      return input.origins.get(key)?.kind === 'flag' && typeof value === 'string' ? JSON.stringify(value) : showValue(value);
    },
    unknownKey: (key) => {
      const origin = input.origins.get(key);
      const where = origin?.kind === 'file' ? `${origin.file}${origin.line == null ? '' : `:${origin.line}`}: ` : '';
      return `${where}unknown key "${printable(key, 40)}" (keys are the flags' camelCase names, e.g. "gpuBlocks")`;
    },
  };
}

/** A UsageError for `issue`, naming the flag or the file and key it is about. */
export function settingError(input: LayeredInput, issue: ConfigIssue): UsageError {
  return new UsageError(describeConfigIssue(issue, layeredNaming(input)));
}

/** A UsageError naming where `key`'s value came from. */
export function invalidValue(input: LayeredInput, key: string, message: string): UsageError {
  return settingError(input, invalidSetting(key, message));
}

/** A UsageError about one item of the list `key` holds, showing that item rather than the whole list. */
export function invalidItem(input: LayeredInput, key: string, item: string, message: string): UsageError {
  const naming: SettingNaming = { ...layeredNaming(input), shown: () => JSON.stringify(item) };
  return new UsageError(describeConfigIssue(invalidSetting(key, message), naming));
}

/** Keys that name JavaScript object internals rather than settings. */
const RESERVED_KEYS: readonly string[] = ['__proto__', 'constructor', 'prototype'];

/**
 * Config files hold JSON numbers where flags hold digits: a string for one
 * of `keys` in a file ("tp": "2") is refused, naming the file and key.
 */
export function rejectStringNumbers(input: LayeredInput, keys: readonly string[]): void {
  for (const key of keys) {
    const origin = input.origins.get(key);
    const value = input.values[key];
    // Other strings fail the key's own schema, which says what it expects.
    if (origin?.kind === 'file' && typeof value === 'string' && value.trim() !== '' && !Number.isNaN(Number(value))) {
      throw invalidValue(input, key, `expected a number (write ${printable(value, 20)} without quotes)`);
    }
  }
}

/** Refuses an output file (`key`) that is one of the run's inputs: writing it would overwrite the input. */
export function checkNotAnInput(input: LayeredInput, key: string, output: string, inputs: readonly string[]): void {
  const target = canonicalPath(output);
  const clash = inputs.find((file) => canonicalPath(file) === target);
  if (clash !== undefined) throw invalidValue(input, key, `${clash} is an input of this run; writing the report there would overwrite it`);
}


/** A config file's settings as parsed, and the line each top-level key is on (YAML only). */
interface ParsedConfig {
  readonly value: unknown;
  readonly format: 'JSON' | 'YAML';
  readonly keyLines: ReadonlyMap<string, number>;
}

/**
 * Which language a config file is in: by extension (.json; .yaml, .yml),
 * else by content (an object starting with "{" is JSON, anything else YAML).
 */
function configFormat(file: string, text: string): 'JSON' | 'YAML' {
  const lower = file.toLowerCase();
  if (lower.endsWith('.json')) return 'JSON';
  if (lower.endsWith('.yaml') || lower.endsWith('.yml')) return 'YAML';
  return text.trimStart().startsWith('{') ? 'JSON' : 'YAML';
}

/** Parses YAML (1.2, core schema: "no" and "on" stay text); errors name the file and line, never echo the text. */
function parseYaml(file: string, text: string): ParsedConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter: lines });
  const error = doc.errors[0];
  if (error !== undefined) {
    const { line, col } = lines.linePos(error.pos[0]);
    const message = error.code === 'MULTIPLE_DOCS' ? 'the file holds several YAML documents; give one' : error.message;
    throw new UsageError(`--config ${file}:${line}:${col}: invalid YAML: ${printable(message, 160)}`);
  }
  const keyLines = new Map<string, number>();
  if (isMap(doc.contents)) {
    for (const pair of doc.contents.items) {
      if (isScalar(pair.key) && typeof pair.key.value === 'string' && pair.key.range) keyLines.set(pair.key.value, lines.linePos(pair.key.range[0]).line);
    }
  }
  return { value: doc.toJS({ maxAliasCount: 100 }), format: 'YAML', keyLines };
}

function parseConfigText(file: string, text: string): ParsedConfig {
  if (configFormat(file, text) === 'YAML') return parseYaml(file, text);
  try {
    return { value: JSON.parse(text), format: 'JSON', keyLines: new Map() };
  } catch (err) {
    throw new UsageError(`--config ${file}: invalid JSON: ${jsonErrorSummary(err)}`);
  }
}

/**
 * Reads a config file holding one object of settings, in JSON or YAML (see
 * configFormat). Keys in `pathKeys` hold file paths; relative ones are taken
 * relative to the config file's folder.
 */
export function readConfigFile(file: string, pathKeys: readonly string[] = []): LayeredInput {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--config ${file}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const { value: parsed, format, keyLines } = parseConfigText(file, withoutBom(text));
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(`--config ${file}: expected a ${format} object of settings`);
  }
  const keys = Object.keys(parsed);
  const reserved = keys.find((key) => RESERVED_KEYS.includes(key));
  if (reserved !== undefined) throw new UsageError(`${file}: key "${reserved}" is not a setting and is not allowed`);
  // A null-prototype copy: no key of the file can reach Object.prototype.
  const values: Record<string, unknown> = Object.assign(Object.create(null) as Record<string, unknown>, parsed);
  const origins = new Map<string, ValueOrigin>();
  for (const key of keys) {
    origins.set(key, { kind: 'file', file, key, line: keyLines.get(key) ?? null });
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
  throw settingError(input, issueFromZod(result.error.issues[0]));
}

/** `--gpu-blocks` from the attribute name `gpuBlocks`. */
function flagName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/** Flag values already split by name (camelCase), as a layer whose origins are the flags. */
export function namedFlagInput(flags: Readonly<Record<string, string | boolean>>): LayeredInput {
  const values: Record<string, unknown> = {};
  const origins = new Map<string, ValueOrigin>();
  for (const [key, value] of Object.entries(flags)) {
    values[key] = value;
    origins.set(key, { kind: 'flag', flag: flagName(key) });
  }
  return { values, origins };
}

/**
 * The flags of a command that defines them in its handler (`kvtier bench
 * <kind>`): "--name value", "--name=value" and a bare "--flag" (true), with
 * kebab-case names in camelCase. The handler checks the values, by the same
 * field schemas and naming as the other commands.
 */
export function looseFlagInput(args: readonly string[]): LayeredInput {
  const flags: Record<string, string | boolean> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const match = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/i.exec(arg);
    if (match === null) throw new UsageError(`unexpected argument "${arg}" (options look like --name value)`);
    const name = match[1].replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    if (match[2] !== undefined) {
      flags[name] = match[2];
    } else if (i + 1 < args.length && !args[i + 1].startsWith('--')) {
      flags[name] = args[++i];
    } else {
      flags[name] = true;
    }
  }
  return namedFlagInput(flags);
}
