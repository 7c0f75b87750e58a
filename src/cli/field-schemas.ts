import { z } from 'zod';
import { MODEL_PRESET_NAMES, isModelPresetName, type ModelPresetName } from '../model/presets.js';
import type { StorePolicyName } from '../runtime/engine-types.js';
import { MOONCAKE_BLOCK_TOKENS } from '../workload/trace.js';
import { parseByteSize } from '../core/byte-size.js';

/**
 * Field schemas shared by the CLI's commands. Flags arrive as strings and
 * config files as JSON values; each schema accepts both and fails with one
 * message saying what it expected, which the caller prefixes with the flag or
 * key and the value.
 */

/** Turns a numeric string (from a flag) into a number; anything else passes through. */
function numericString(value: unknown): unknown {
  if (typeof value === 'string' && /^\s*[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*$/i.test(value)) return Number(value);
  return value;
}

/** An integer in [min, max]; `tooBig` is the message for values above a given max. */
function integerAtLeast(min: number, expected: string, max?: number, tooBig = expected) {
  return z.preprocess(
    numericString,
    z
      .number({ error: expected })
      .int({ error: expected })
      .min(min, { error: expected })
      .max(max ?? Number.MAX_SAFE_INTEGER, { error: tooBig }),
  );
}

/** A positive integer, optionally at most `max` (the engine's own limit for that setting). */
export const positiveInt = (max?: number) =>
  integerAtLeast(1, 'expected a positive integer', max, max === undefined ? undefined : `expected a positive integer up to ${max}`);
export const nonNegativeInt = (max?: number) =>
  integerAtLeast(0, 'expected an integer >= 0', max, max === undefined ? undefined : `expected an integer from 0 to ${max}`);

export const positiveNumber = () => {
  const expected = 'expected a number > 0';
  return z.preprocess(numericString, z.number({ error: expected }).positive({ error: expected }).finite({ error: expected }));
};

export const nonEmptyString = (what: string) => z.string({ error: `expected ${what}` }).min(1, { error: `expected ${what}` });

export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.join(', ')}` });

export const flag = () => z.boolean({ error: 'expected true or false' });

/** A model preset name. */
export const modelPreset = () =>
  z.string().refine(isModelPresetName, { error: `expected a model preset: ${MODEL_PRESET_NAMES.join(', ')}` }).transform((name) => name as ModelPresetName);

/** A byte count, as a number or a string with a unit ("512MiB", "1.5GB"). */
export const byteSize = () => {
  const expected = 'expected a size in bytes such as 4096, 512MiB, 2GiB or 1.5GB';
  return z
    .union([z.number(), z.string()], { error: expected })
    .transform((value, ctx) => {
      const bytes = typeof value === 'number' ? value : parseByteSize(value);
      if (bytes === null || !Number.isSafeInteger(bytes) || bytes < 1) {
        ctx.addIssue({ code: 'custom', message: expected });
        return z.NEVER;
      }
      return bytes;
    });
};

/** "START:END" seconds (either side may be left out) or [start, end]; end > start >= 0. */
export const timeWindow = () => {
  const expected = 'expected START:END in seconds with 0 <= START < END (e.g. 0:600, 60:)';
  return z.union([z.string(), z.tuple([z.number(), z.number()])], { error: expected }).transform((value, ctx): [number, number] => {
    let window: [number, number] | null = null;
    if (Array.isArray(value)) {
      window = [value[0], value[1]];
    } else {
      const match = /^\s*([^:]*):([^:]*)\s*$/.exec(value);
      if (match !== null) {
        const start = match[1].trim() === '' ? 0 : Number(match[1]);
        const end = match[2].trim() === '' ? Infinity : Number(match[2]);
        window = [start, end];
      }
    }
    if (window === null || !(Number.isFinite(window[0]) && window[0] >= 0 && window[1] > window[0])) {
      ctx.addIssue({ code: 'custom', message: expected });
      return z.NEVER;
    }
    return window;
  });
};

/** A divisor of the 512-token trace block. */
export const tokenScale = () => {
  const expected = `expected a whole divisor of the ${MOONCAKE_BLOCK_TOKENS}-token trace block (1, 2, 4, ..., ${MOONCAKE_BLOCK_TOKENS})`;
  return z.preprocess(
    numericString,
    z.number({ error: expected }).refine((n) => Number.isInteger(n) && n >= 1 && MOONCAKE_BLOCK_TOKENS % n === 0, { error: expected }),
  );
};

/** on-compute | on-evict | reuse:K (K >= 1). */
export const storePolicy = () => {
  const expected = 'expected on-compute, on-evict or reuse:K with K >= 1';
  return z.string({ error: expected }).refine((s) => s === 'on-compute' || s === 'on-evict' || /^reuse:[1-9]\d*$/.test(s), { error: expected }).transform((s) => s as StorePolicyName);
};
