import type { CompletionSpec } from '../completion-backend.js';
import { HttpError, type OpenAiErrorType } from '../openai-errors.js';

/**
 * The messages between the engine's thread (main) and the HTTP front-end
 * thread, beside the token ring (token-ring.ts), and the packing of
 * arrivals. Everything per token goes through the ring; messages carry what
 * is rare or has text: refusals, errors, aborts, metrics, drain and close.
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
  /** The completions that arrived in one event-loop turn (packArrivals). */
  | { readonly type: 'arrivals'; readonly packed: Uint32Array; readonly salts: readonly (string | null)[] | null }
  | { readonly type: 'abort'; readonly slot: number }
  | { readonly type: 'metrics'; readonly id: number }
  /** The ring has room again: the writer may move its queue in. */
  | { readonly type: 'room' }
  | { readonly type: 'closed' };

/** Main to front end. */
export type MainMessage =
  /** The answer to one arrivals message, in order: the completions it refused; the others were queued. */
  | { readonly type: 'admitted'; readonly refused: readonly { readonly slot: number; readonly error: WireError }[] }
  /** A queued completion ended with an error or an abort (after its records). */
  | { readonly type: 'failed'; readonly slot: number; readonly error: WireError }
  | { readonly type: 'metrics'; readonly id: number; readonly text: string }
  /** Write out the responses in flight, close the listener, answer 'closed'. */
  | { readonly type: 'close' };

/** One completion of an arrivals batch. */
export interface Arrival extends CompletionSpec {
  readonly slot: number;
}

/** Words before each arrival's prompt: slot, maxTokens, seed, prompt length. */
const ARRIVAL_HEAD = 4;

/** Packs arrivals into one array (sent by transfer, no copy): per arrival its head words and its prompt tokens; salts beside, null when none has one. */
export function packArrivals(arrivals: readonly Arrival[]): { packed: Uint32Array; salts: (string | null)[] | null } {
  let words = 0;
  for (const a of arrivals) words += ARRIVAL_HEAD + a.promptTokens.length;
  const packed = new Uint32Array(words);
  let at = 0;
  let salts: (string | null)[] | null = null;
  arrivals.forEach((a, i) => {
    packed[at] = a.slot;
    packed[at + 1] = a.maxTokens;
    packed[at + 2] = a.seed;
    packed[at + 3] = a.promptTokens.length;
    packed.set(a.promptTokens, at + ARRIVAL_HEAD);
    at += ARRIVAL_HEAD + a.promptTokens.length;
    if (a.cacheSalt !== null) {
      salts ??= new Array<string | null>(arrivals.length).fill(null);
      salts[i] = a.cacheSalt;
    }
  });
  return { packed, salts };
}

/** The arrivals of a packed batch, in order; prompts are views into `packed`. */
export function unpackArrivals(packed: Uint32Array, salts: readonly (string | null)[] | null, visit: (slot: number, spec: { promptTokens: Uint32Array; maxTokens: number; seed: number; cacheSalt: string | null }) => void): void {
  let at = 0;
  let i = 0;
  while (at < packed.length) {
    const length = packed[at + 3];
    visit(packed[at], {
      promptTokens: packed.subarray(at + ARRIVAL_HEAD, at + ARRIVAL_HEAD + length),
      maxTokens: packed[at + 1],
      seed: packed[at + 2],
      cacheSalt: salts?.[i] ?? null,
    });
    at += ARRIVAL_HEAD + length;
    i++;
  }
}
