import { z } from 'zod';
import { MODEL_PRESET_NAMES, isModelPresetName, type ModelPresetName } from '../model/presets.js';
import { engineField, type EngineSettingKey } from '../config/engine-schema.js';
import * as settingFields from '../config/fields.js';
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

/** A positive integer, optionally at most `max`, from a flag or a JSON number. */
export const positiveInt = (max?: number) => z.preprocess(numericString, settingFields.positiveInt(max));
/** An integer >= 0, optionally at most `max`, from a flag or a JSON number. */
export const nonNegativeInt = (max?: number) => z.preprocess(numericString, settingFields.nonNegativeInt(max));

/**
 * One of the engine's settings, checked by the engine's own field (type,
 * limit, message) without its default: a flag or config key that sets an
 * engine setting accepts exactly what the engine accepts. Numeric strings
 * from flags are read as numbers.
 */
export const engineSetting = <K extends EngineSettingKey>(key: K) => z.preprocess(numericString, engineField(key));

export const positiveNumber = () => {
  const expected = 'expected a number > 0';
  return z.preprocess(numericString, z.number({ error: expected }).positive({ error: expected }).finite({ error: expected }));
};

export const nonEmptyString = (what: string) => z.string({ error: `expected ${what}` }).min(1, { error: `expected ${what}` });

export const oneOf = settingFields.oneOf;
export const flag = settingFields.flag;

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

/*
 * Schemas for options a command reads one by one (the benches): each says in
 * its message exactly what `--help` lists as the option's expected value.
 */

/** What an integer option expects, in words. */
export function integerExpected(min: number, max: number): string {
  return max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer from ${min} to ${max}`;
}

/** An integer in [min, max] from a flag's digits or a JSON number. */
export const integerIn = (min: number, max: number) => {
  const expected = `expected ${integerExpected(min, max)}`;
  return z.preprocess(numericString, z.number({ error: expected }).int({ error: expected }).min(min, { error: expected }).max(max, { error: expected }));
};

/** Any text. */
export const text = () => z.string({ error: 'expected a value' });

/** true or false: a bare flag, the words "true" and "false", or a JSON boolean. */
export const booleanFlag = () =>
  z.preprocess((value) => (value === 'true' ? true : value === 'false' ? false : value), z.boolean({ error: 'expected true or false' }));

/** One of `choices`, as the help lists them ("a | b"). */
export const choice = <T extends string>(choices: readonly T[]) => {
  const expected = `expected ${choices.join(' | ')}`;
  return z.string({ error: expected }).refine((value): value is T => (choices as readonly string[]).includes(value), { error: expected });
};

/** A byte count from a size with a unit ("64MiB"). */
export const unitByteSize = () => {
  const expected = 'expected a byte size such as 64MiB';
  return z.string({ error: expected }).transform((value, ctx) => {
    const bytes = parseByteSize(value);
    if (bytes === null || bytes < 1) {
      ctx.addIssue({ code: 'custom', message: expected });
      return z.NEVER;
    }
    return bytes;
  });
};

/** A comma-separated list of positive integers, each at most `max`. */
export const positiveIntList = (max = Number.MAX_SAFE_INTEGER) => {
  const expected = `expected a comma-separated list of positive integers${max === Number.MAX_SAFE_INTEGER ? '' : ` up to ${max}`}`;
  return z.string({ error: expected }).transform((value, ctx) => {
    const items = value.split(',').map(Number);
    if (items.some((n) => !Number.isInteger(n) || n < 1 || n > max)) {
      ctx.addIssue({ code: 'custom', message: expected });
      return z.NEVER;
    }
    return items;
  });
};

/** A comma-separated list of `choices`. */
export const choiceList = <T extends string>(choices: readonly T[]) => {
  const expected = `expected a comma-separated list of ${choices.join(', ')}`;
  return z.string({ error: expected }).transform((value, ctx) => {
    const items = value.split(',');
    if (items.some((item) => !(choices as readonly string[]).includes(item))) {
      ctx.addIssue({ code: 'custom', message: expected });
      return z.NEVER;
    }
    return items as T[];
  });
};
