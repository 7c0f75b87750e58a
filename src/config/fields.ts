import { z } from 'zod';

/**
 * Field schemas of the engine's settings. Each fails with one message saying
 * what it expected; describeConfigIssue (issues.ts) puts the setting's name
 * and value in front of it. They accept JSON values only: the CLI wraps the
 * numeric ones to read flags' strings (src/cli/field-schemas.ts).
 */

/** An integer in [min, max]; `tooBig` is the message for values above a given max. */
function integerIn(min: number, expected: string, max?: number, tooBig = expected) {
  return z
    .number({ error: expected })
    .int({ error: expected })
    .min(min, { error: expected })
    .max(max ?? Number.MAX_SAFE_INTEGER, { error: tooBig });
}

/** A positive integer, optionally at most `max`. */
export const positiveInt = (max?: number) =>
  integerIn(1, 'expected a positive integer', max, max === undefined ? undefined : `expected a positive integer up to ${max}`);

/** An integer >= 0, optionally at most `max`. */
export const nonNegativeInt = (max?: number) =>
  integerIn(0, 'expected an integer >= 0', max, max === undefined ? undefined : `expected an integer from 0 to ${max}`);

export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.join(', ')}` });

export const flag = () => z.boolean({ error: 'expected true or false' });
