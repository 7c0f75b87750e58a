import { KvtierError } from '../core/errors.js';
import { ERROR_CODES } from '../core/error-codes.js';

/** A command-line flag or config file key has a bad value; the CLI exits with code 2. */
export class UsageError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.usage, message, options);
  }
}
