import { ConfigError } from '../core/errors.js';

/** Small statistics and option checks the benches share. */

/** The median of a non-empty list (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of an empty list');
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Throws ConfigError when an optional option is set but is not an integer >= min. */
export function checkIntegerAtLeast(bench: string, name: string, value: number | undefined, min: number): void {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < min)) {
    throw new ConfigError(`${bench} bench: ${name} = ${String(value)} must be an integer >= ${min}`);
  }
}
