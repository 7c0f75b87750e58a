import { parseByteSize } from './byte-size.js';
import { UsageError } from './usage-error.js';

/**
 * Reads a bench's loose options (`--name value`), each at most once, with a
 * clear UsageError naming the flag for a bad value; `finish()` rejects the
 * options nobody read.
 */
export class BenchOptions {
  private readonly used = new Set<string>();

  constructor(
    private readonly kind: string,
    private readonly raw: Record<string, string | boolean>,
  ) {}

  string(name: string, fallback: string): string {
    const value = this.take(name);
    if (value === undefined) return fallback;
    if (typeof value !== 'string') throw this.bad(name, value, 'a value');
    return value;
  }

  optionalString(name: string): string | null {
    const value = this.take(name);
    if (value === undefined) return null;
    if (typeof value !== 'string') throw this.bad(name, value, 'a value');
    return value;
  }

  flag(name: string, fallback: boolean): boolean {
    const value = this.take(name);
    if (value === undefined) return fallback;
    if (value === true || value === 'true') return true;
    if (value === 'false') return false;
    throw this.bad(name, value, 'true or false');
  }

  oneOf<T extends string>(name: string, choices: readonly T[], fallback: T): T {
    const value = this.string(name, fallback);
    if (!(choices as readonly string[]).includes(value)) throw this.bad(name, value, choices.join(' | '));
    return value as T;
  }

  int(name: string, fallback: number, min = 1): number {
    const value = this.string(name, String(fallback));
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw this.bad(name, value, `an integer >= ${min}`);
    return n;
  }

  /** A finite number > 0. */
  positiveNumber(name: string, fallback: number): number {
    const value = this.string(name, String(fallback));
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw this.bad(name, value, 'a number > 0');
    return n;
  }

  /** Throws a UsageError naming the flag when it was given although `conflict` holds (`reason` says why). */
  forbid(name: string, conflict: boolean, reason: string): void {
    this.used.add(name);
    if (conflict && this.raw[name] !== undefined) throw new UsageError(`bench ${this.kind}: --${kebab(name)} ${reason}`);
  }

  bytes(name: string, fallback: number): number {
    const value = this.take(name);
    if (value === undefined) return fallback;
    const n = typeof value === 'string' ? parseByteSize(value) : null;
    if (n === null || n < 1) throw this.bad(name, value, 'a byte size such as 64MiB');
    return n;
  }

  intList(name: string, fallback: readonly number[]): number[] {
    const value = this.take(name);
    if (value === undefined) return [...fallback];
    const items = typeof value === 'string' ? value.split(',').map(Number) : [NaN];
    if (items.some((n) => !Number.isInteger(n) || n < 1)) throw this.bad(name, value, 'a comma-separated list of positive integers');
    return items;
  }

  list<T extends string>(name: string, choices: readonly T[], fallback: readonly T[]): T[] {
    const value = this.take(name);
    if (value === undefined) return [...fallback];
    const items = typeof value === 'string' ? value.split(',') : [];
    const bad = items.find((item) => !(choices as readonly string[]).includes(item));
    if (items.length === 0 || bad !== undefined) throw this.bad(name, value, `a comma-separated list of ${choices.join(', ')}`);
    return items as T[];
  }

  /** Throws for every option given that the bench does not know. */
  finish(): void {
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
    return new UsageError(`bench ${this.kind}: --${kebab(name)}: invalid value "${String(value)}": expected ${expected}`);
  }
}

function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
