import type { z } from 'zod';
import { engineIntRange, type EngineSettingKey } from '../config/engine-schema.js';
import { describeConfigIssue, invalidSetting, issueFromZod, type ConfigIssue, type SettingNaming } from '../config/issues.js';
import { layeredNaming, type LayeredInput } from './config-input.js';
import {
  booleanFlag,
  choice,
  choiceList,
  engineSetting,
  integerExpected,
  integerIn,
  positiveIntList,
  positiveNumber,
  text,
  unitByteSize,
} from './field-schemas.js';
import { UsageError } from './usage-error.js';

/**
 * Reads a bench's options, each at most once, from the same layered input
 * and field schemas as the other commands (config-input.ts,
 * field-schemas.ts): a bad value is a UsageError naming the flag and the
 * value; `finish()` rejects the options nobody read.
 */
/** Thrown by finish() after `--help`: the bench's options, to print instead of running it. */
export class BenchHelp extends Error {
  constructor(readonly text: string) {
    super(text);
  }
}

export class BenchOptions {
  private readonly used = new Set<string>();
  /** Set by `--help`: every option read is listed (with its default) and finish() throws BenchHelp. */
  private readonly help: { name: string; expected: string; fallback: string }[] | null;
  /** Options are named as flags, values as given. */
  private readonly naming: SettingNaming;

  constructor(
    private readonly kind: string,
    private readonly input: LayeredInput,
  ) {
    this.help = input.values.help === undefined ? null : [];
    this.naming = layeredNaming(input);
  }

  /** Lists `name` in the help (when --help was given); returns whether the bench should just take its default. */
  private describe(name: string, expected: string, fallback: unknown): boolean {
    if (this.help === null) return false;
    const shown = Array.isArray(fallback) ? fallback.join(',') : fallback === null || fallback === undefined ? '' : String(fallback);
    if (!this.help.some((h) => h.name === name)) this.help.push({ name, expected, fallback: shown });
    return true;
  }

  /** `name`'s value checked by `schema`, or `fallback` when it was not given (or --help was). */
  private read<T, F>(name: string, expected: string, schema: z.ZodType<T>, fallback: F): T | F {
    if (this.describe(name, expected, fallback)) return fallback;
    const value = this.take(name);
    if (value === undefined) return fallback;
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw this.error(issueFromZod({ ...parsed.error.issues[0], path: [name] }));
    return parsed.data;
  }

  string(name: string, fallback: string): string {
    return this.read(name, 'a value', text(), fallback);
  }

  /** `expected` says what the value is in the help (a file, unless told). */
  optionalString(name: string, expected = name === 'trace' ? 'a trace file' : 'a file'): string | null {
    return this.read(name, expected, text(), null);
  }

  /** The value of `name` if it is a string, without taking it: for checks that span options (outputs against inputs). */
  peekString(name: string): string | null {
    const value = this.input.values[name];
    return typeof value === 'string' ? value : null;
  }

  flag(name: string, fallback: boolean): boolean {
    return this.read(name, 'true | false', booleanFlag(), fallback);
  }

  oneOf<T extends string>(name: string, choices: readonly T[], fallback: T): T {
    return this.read(name, choices.join(' | '), choice(choices), fallback);
  }

  int(name: string, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): number {
    return this.read(name, integerExpected(min, max), integerIn(min, max), fallback);
  }

  /**
   * An engine setting's value, checked by the engine's own field
   * (src/config/engine-schema.ts) as `kvtier run` checks the same flag, so
   * both accept the same values and refuse them in the same words.
   */
  engineInt(name: string, key: EngineSettingKey, fallback: number): number {
    const { min, max } = engineIntRange(key);
    return this.read(name, integerExpected(min, max), engineSetting(key), fallback) as number;
  }

  /** A finite number > 0. */
  positiveNumber(name: string, fallback: number): number {
    return this.read(name, 'a number > 0', positiveNumber(), fallback);
  }

  /** Throws a UsageError naming the flag when it was given although `conflict` holds (`reason` says why). */
  forbid(name: string, conflict: boolean, reason: string): void {
    if (this.help !== null) return;
    this.used.add(name);
    if (conflict && this.input.values[name] !== undefined) throw new UsageError(`bench ${this.kind}: ${this.naming.where([name])} ${reason}`);
  }

  bytes(name: string, fallback: number): number {
    return this.read(name, 'a byte size such as 64MiB', unitByteSize(), fallback);
  }

  intList(name: string, fallback: readonly number[], max = Number.MAX_SAFE_INTEGER): number[] {
    const expected = `a comma-separated list of positive integers${max === Number.MAX_SAFE_INTEGER ? '' : ` up to ${max}`}`;
    return [...this.read(name, expected, positiveIntList(max), fallback)];
  }

  list<T extends string>(name: string, choices: readonly T[], fallback: readonly T[]): T[] {
    return [...this.read(name, `a comma-separated list of ${choices.join(', ')}`, choiceList(choices), fallback)];
  }

  /** A UsageError naming the flag and its value (for checks across options the bench makes itself). */
  invalid(name: string, message: string): UsageError {
    return this.error(invalidSetting(name, message));
  }

  /** A UsageError for `issue` (e.g. an engine rule's), naming the flag and its value (or `value`, when given). */
  error(issue: ConfigIssue, value?: unknown): UsageError {
    const naming: SettingNaming = value === undefined ? this.naming : { ...this.naming, shown: () => `"${String(value)}"` };
    return new UsageError(`bench ${this.kind}: ${describeConfigIssue(issue, naming)}`);
  }

  /** true when `--help` asked for the option list (values are then the defaults). */
  get helpRequested(): boolean {
    return this.help !== null;
  }

  /** Throws for every option given that the bench does not know; after `--help`, throws BenchHelp with the option list. */
  finish(): void {
    if (this.help !== null) {
      const rows = this.help.map((h) => [`  --${kebab(h.name)} <${h.expected}>`, h.fallback === '' ? '' : `(default ${h.fallback})`]);
      const width = Math.max(...rows.map((r) => r[0].length));
      const lines = rows.map(([left, right]) => `${left.padEnd(width)}  ${right}`.trimEnd());
      throw new BenchHelp(`Usage: kvtier bench ${this.kind} [options]\n\nOptions:\n${lines.join('\n')}`);
    }
    const unknown = Object.keys(this.input.values).filter((k) => !this.used.has(k));
    if (unknown.length > 0) {
      throw new UsageError(`bench ${this.kind}: unknown option ${unknown.map((k) => this.naming.where([k])).join(', ')}`);
    }
  }

  private take(name: string): unknown {
    this.used.add(name);
    return this.input.values[name];
  }
}

function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
