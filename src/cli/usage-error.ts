import { KvtierError } from '../core/errors.js';

/** A command-line flag or config file key has a bad value; the CLI exits with code 2. */
export class UsageError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_KVTIER_USAGE', message, options);
  }
}
