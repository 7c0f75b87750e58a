import { engineIntRange, type EngineSettingKey } from '../config/engine-schema.js';
import { describeConfigIssue, invalidSetting, type ConfigIssue, type SettingNaming } from '../config/issues.js';
import { parseByteSize } from '../core/byte-size.js';
import { engineSetting } from './field-schemas.js';
import { UsageError } from './usage-error.js';

/**
 * Reads a bench's loose options (`--name value`), each at most once, with a
 * clear UsageError naming the flag for a bad value; `finish()` rejects the
 * options nobody read.
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

  constructor(
    private readonly kind: string,
    private readonly raw: Record<string, string | boolean>,
  ) {
    this.help = raw.help === undefined ? null : [];
  }

  /** Lists `name` in the help (when --help was given); returns whether the bench should just take its default. */
  private describe(name: string, expected: string, fallback: unknown): boolean {
    if (this.help === null) return false;
    const shown = Array.isArray(fallback) ? fallback.join(',') : fallback === null || fallback === undefined ? '' : String(fallback);
    if (!this.help.some((h) => h.name === name)) this.help.push({ name, expected, fallback: shown });
    return true;
  }

  string(name: string, fallback: string): string {
    if (this.describe(name, 'a value', fallback)) return fallback;
    const value = this.take(name);
    if (value === undefined) return fallback;
    if (typeof value !== 'string') throw this.bad(name, value, 'a value');
    return value;
  }

  /** `expected` says what the value is in the help (a file, unless told). */
  optionalString(name: string, expected = name === 'trace' ? 'a trace file' : 'a file'): string | null {
    if (this.describe(name, expected, null)) return null;
    const value = this.take(name);
    if (value === undefined) return null;
    if (typeof value !== 'string') throw this.bad(name, value, 'a value');
    return value;
  }

  /** The value of `name` if it is a string, without taking it: for checks that span options (outputs against inputs). */
  peekString(name: string): string | null {
    const value = this.raw[name];
    return typeof value === 'string' ? value : null;
  }

  flag(name: string, fallback: boolean): boolean {
    if (this.describe(name, 'true | false', fallback)) return fallback;
    const value = this.take(name);
    if (value === undefined) return fallback;
    if (value === true || value === 'true') return true;
    if (value === 'false') return false;
    throw this.bad(name, value, 'true or false');
  }

  oneOf<T extends string>(name: string, choices: readonly T[], fallback: T): T {
    if (this.describe(name, choices.join(' | '), fallback)) return fallback;
    const value = this.string(name, fallback);
    if (!(choices as readonly string[]).includes(value)) throw this.bad(name, value, choices.join(' | '));
    return value as T;
  }

  int(name: string, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): number {
    const expected = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer from ${min} to ${max}`;
    if (this.describe(name, expected, fallback)) return fallback;
    const value = this.string(name, String(fallback));
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw this.bad(name, value, expected);
    return n;
  }

  /**
   * An engine setting's value, checked by the engine's own field
   * (src/config/engine-schema.ts) as `kvtier run` checks the same flag, so
   * both accept the same values and refuse them in the same words.
   */
  engineInt(name: string, key: EngineSettingKey, fallback: number): number {
    const { min, max } = engineIntRange(key);
    const expected = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer from ${min} to ${max}`;
    if (this.describe(name, expected, fallback)) return fallback;
    const value = this.take(name);
    if (value === undefined) return fallback;
    const parsed = engineSetting(key).safeParse(value);
    if (!parsed.success) throw this.error(invalidSetting(name, parsed.error.issues[0].message), value);
    return parsed.data as number;
  }

  /** A finite number > 0. */
  positiveNumber(name: string, fallback: number): number {
    if (this.describe(name, 'a number > 0', fallback)) return fallback;
    const value = this.string(name, String(fallback));
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw this.bad(name, value, 'a number > 0');
    return n;
  }

  /** Throws a UsageError naming the flag when it was given although `conflict` holds (`reason` says why). */
  forbid(name: string, conflict: boolean, reason: string): void {
    if (this.help !== null) return;
    this.used.add(name);
    if (conflict && this.raw[name] !== undefined) throw new UsageError(`bench ${this.kind}: --${kebab(name)} ${reason}`);
  }

  bytes(name: string, fallback: number): number {
    if (this.describe(name, 'a byte size such as 64MiB', fallback)) return fallback;
    const value = this.take(name);
    if (value === undefined) return fallback;
    const n = typeof value === 'string' ? parseByteSize(value) : null;
    if (n === null || n < 1) throw this.bad(name, value, 'a byte size such as 64MiB');
    return n;
  }

  intList(name: string, fallback: readonly number[], max = Number.MAX_SAFE_INTEGER): number[] {
    const expected = `a comma-separated list of positive integers${max === Number.MAX_SAFE_INTEGER ? '' : ` up to ${max}`}`;
    if (this.describe(name, expected, fallback)) return [...fallback];
    const value = this.take(name);
    if (value === undefined) return [...fallback];
    const items = typeof value === 'string' ? value.split(',').map(Number) : [NaN];
    if (items.some((n) => !Number.isInteger(n) || n < 1 || n > max)) throw this.bad(name, value, expected);
    return items;
  }

  list<T extends string>(name: string, choices: readonly T[], fallback: readonly T[]): T[] {
    if (this.describe(name, `a comma-separated list of ${choices.join(', ')}`, fallback)) return [...fallback];
    const value = this.take(name);
    if (value === undefined) return [...fallback];
    const items = typeof value === 'string' ? value.split(',') : [];
    const bad = items.find((item) => !(choices as readonly string[]).includes(item));
    if (items.length === 0 || bad !== undefined) throw this.bad(name, value, `a comma-separated list of ${choices.join(', ')}`);
    return items as T[];
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

  /** Options are named as flags, values as given. */
  private readonly naming: SettingNaming = {
    where: (path) => `--${kebab(path[0] ?? '')}`,
    shown: (path) => `"${String(this.raw[path[0] ?? ''] ?? '')}"`,
    unknownKey: (key) => `unknown option --${kebab(key)}`,
  };

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
    const unknown = Object.keys(this.raw).filter((k) => !this.used.has(k));
    if (unknown.length > 0) {
      throw new UsageError(`bench ${this.kind}: unknown option ${unknown.map((k) => `--${kebab(k)}`).join(', ')}`);
    }
  }

  private take(name: string): string | boolean | undefined {
    this.used.add(name);
    return this.raw[name];
  }

  private bad(name: string, value: unknown, expected: string): UsageError {
    return this.error(invalidSetting(name, `expected ${expected}`), value);
  }
}

function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
