import { ERROR_CODES } from '../core/error-codes.js';
import { KvtierError } from '../core/errors.js';

/**
 * Errors as OpenAI's API returns them: an HTTP status and a body
 * `{"error": {"message", "type", "param", "code"}}`, which OpenAI's clients
 * turn into their typed errors (BadRequestError for 400,
 * RateLimitError for 429, InternalServerError for 5xx...).
 */

export type OpenAiErrorType = 'invalid_request_error' | 'not_found_error' | 'rate_limit_error' | 'service_unavailable_error' | 'server_error';

export interface OpenAiErrorBody {
  readonly error: { readonly message: string; readonly type: OpenAiErrorType; readonly param: string | null; readonly code: string | null };
}

export class HttpError extends KvtierError {
  constructor(
    readonly status: number,
    readonly type: OpenAiErrorType,
    message: string,
    readonly param: string | null = null,
    /** The body's `code`: OpenAI's kind of refusal, or the code of the kvtier error behind it. */
    readonly bodyCode: string = ERROR_CODES.http,
  ) {
    super(ERROR_CODES.http, message);
  }

  body(): OpenAiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.bodyCode } };
  }
}

/** A 400 naming the request field (`param`) that is wrong. */
export function invalidField(param: string, message: string): HttpError {
  return new HttpError(400, 'invalid_request_error', `${param}: ${message}`, param, 'invalid_value');
}
