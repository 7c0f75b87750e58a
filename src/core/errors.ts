import { ERROR_CODES, type ErrorCode } from './error-codes.js';

/**
 * Errors carry a stable `code` so callers can branch on the kind of failure
 * without parsing messages. Messages name the field, value, line or rank.
 */
export class KvtierError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A configuration value is missing, malformed or inconsistent. */
export class ConfigError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.config, message, options);
  }
}

/** A request was rejected before it was accepted (empty prompt, out-of-vocab token, too long...). */
export class RequestError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.request, message, options);
  }
}

/** A rank worker died, threw, or missed its step deadline. */
export class RankError extends KvtierError {
  readonly rank: number;
  readonly cause_: string;

  constructor(rank: number, cause: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.rank, `rank ${rank} failed: ${cause}`, options);
    this.rank = rank;
    this.cause_ = cause;
  }
}

/** A trace file line could not be parsed. */
export class TraceError extends KvtierError {
  readonly line: number;

  constructor(file: string, line: number, message: string) {
    super(ERROR_CODES.trace, `${file}:${line}: ${message}`);
    this.line = line;
  }
}

/** The engine failed and can no longer serve requests. */
export class EngineError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.engine, message, options);
  }
}
