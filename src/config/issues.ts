import type { z } from 'zod';
import { printable } from '../core/safe-text.js';

/**
 * One problem with a setting. The engine's config, the scheduler's, the CLI's
 * flags and config files, and the benches' options all turn their problems
 * into ConfigIssues and word them with describeConfigIssue, so every message
 * names the setting (as a key, a flag, or a key in a file) and its value the
 * same way: `<setting>: invalid value <value>: <what was expected>`.
 */
export type ConfigIssue =
  | { readonly kind: 'invalid'; readonly path: readonly string[]; readonly message: string }
  /** The message shows the value itself, in a form safe to print (a URL with its password masked). */
  | { readonly kind: 'stated'; readonly path: readonly string[]; readonly message: string }
  | { readonly kind: 'unknown'; readonly key: string };

/** A problem with `key`'s value: `message` says what was expected or why it cannot be used. */
export function invalidSetting(key: string, message: string): ConfigIssue {
  return { kind: 'invalid', path: [key], message };
}

/** A problem with `key` whose message shows the value itself: worded `<setting>: <message>`. */
export function statedSetting(key: string, message: string): ConfigIssue {
  return { kind: 'stated', path: [key], message };
}

/** The issue zod reported (the first one is what a message shows). */
export function issueFromZod(issue: z.core.$ZodIssue): ConfigIssue {
  if (issue.code === 'unrecognized_keys') return { kind: 'unknown', key: [...issue.path.map(String), issue.keys[0]].join('.') };
  return { kind: 'invalid', path: issue.path.map(String), message: issue.message };
}

/** How one source of settings names them in messages. */
export interface SettingNaming {
  /** The setting at `path` as a message names it: `tp`, `--tp`, `key "tp" in run.json`. */
  where(path: readonly string[]): string;
  /** Its value as a message shows it, or undefined when it was not given. */
  shown(path: readonly string[]): string | undefined;
  /** The whole message for a key the schema does not know. */
  unknownKey(key: string): string;
}

/** The one wording of a ConfigIssue. */
export function describeConfigIssue(issue: ConfigIssue, naming: SettingNaming): string {
  if (issue.kind === 'unknown') return naming.unknownKey(issue.key);
  if (issue.kind === 'stated') return `${naming.where(issue.path)}: ${issue.message}`;
  const shown = naming.shown(issue.path);
  const where = naming.where(issue.path);
  return shown === undefined ? `${where}: missing: ${issue.message}` : `${where}: invalid value ${shown}: ${issue.message}`;
}

/** A JSON value as a message shows it: JSON text, control characters escaped, long values cut. */
export function showValue(value: unknown): string {
  return printable(JSON.stringify(value) ?? String(value));
}

/** Naming for a plain settings object (the library's configs): each setting by its key path. */
export function objectNaming(input: unknown): SettingNaming {
  return {
    where: (path) => path.join('.') || 'config',
    shown: (path) => {
      const value = valueAt(input, path);
      return value === undefined ? undefined : showValue(value);
    },
    unknownKey: (key) => `unknown key "${printable(key, 40)}"`,
  };
}

/** Naming for settings already named as the caller shows them (`remote`, `--remote`): the path is the name. */
export const literalNaming: SettingNaming = {
  where: (path) => path.join('.'),
  shown: () => undefined,
  unknownKey: (key) => `unknown key "${printable(key, 40)}"`,
};

function valueAt(input: unknown, path: readonly string[]): unknown {
  let value: unknown = input;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}
