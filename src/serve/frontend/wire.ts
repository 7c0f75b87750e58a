import { HttpError, type OpenAiErrorType } from '../openai-errors.js';

/**
 * The messages between the engine's thread (main) and the HTTP front-end
 * thread, beside the arrival ring (arrival-ring.ts: completions to the
 * engine) and the token ring (token-ring.ts: tokens, ends and answers
 * back). Messages carry what is rare or has text: a wake for a sleeping
 * serving loop, refusals' and errors' text, aborts, metrics, drain and close.
 */

/** An error as the front end answers it: an HttpError's fields. */
export interface WireError {
  readonly status: number;
  readonly type: OpenAiErrorType;
  readonly message: string;
  readonly param: string | null;
  readonly bodyCode: string;
}

export function toWire(error: HttpError): WireError {
  return { status: error.status, type: error.type, message: error.message, param: error.param, bodyCode: error.bodyCode };
}

export function fromWire(error: WireError): HttpError {
  return new HttpError(error.status, error.type, error.message, error.param, error.bodyCode);
}

/** What the front-end thread is started with (workerData). */
export interface FrontendThreadData {
  readonly ring: SharedArrayBuffer;
  readonly arrivals: SharedArrayBuffer;
  readonly host: string;
  readonly port: number;
  readonly modelName: string;
  readonly vocabSize: number;
  readonly maxModelLen: number;
  readonly streamInterval: number;
}

/** Front end to main. */
export type FrontendMessage =
  | { readonly type: 'listening'; readonly url: string; readonly port: number; readonly threadId: number | null }
  | { readonly type: 'listen-failed'; readonly code: string | null; readonly message: string }
  /** Arrivals were published while the serving loop sleeps: read them. */
  | { readonly type: 'wake' }
  | { readonly type: 'abort'; readonly slot: number }
  | { readonly type: 'metrics'; readonly id: number }
  /** The token ring has room again: the writer may move its queue in. */
  | { readonly type: 'room' }
  | { readonly type: 'closed' };

/** Main to front end. */
export type MainMessage =
  /** The error of a completion the token ring's refused record named. */
  | { readonly type: 'refused'; readonly slot: number; readonly error: WireError }
  /** The arrival ring has room again: the front end may move its queue in. */
  | { readonly type: 'arrival-room' }
  /** A queued completion ended with an error or an abort (after its records). */
  | { readonly type: 'failed'; readonly slot: number; readonly error: WireError }
  | { readonly type: 'metrics'; readonly id: number; readonly text: string }
  /** Write out the responses in flight, close the listener, answer 'closed'. */
  | { readonly type: 'close' };
