import { expect } from 'vitest';
import { parseRunArgs, UsageError } from '../../src/cli/run-config.js';

/** The UsageError message `kvtier run` gives for these arguments (fails the test if they parse). */
export function usageMessage(argv: string[]): string {
  try {
    parseRunArgs(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).code).toBe('ERR_KVTIER_USAGE');
    return (err as Error).message;
  }
  throw new Error(`expected ${argv.join(' ')} to be rejected`);
}
