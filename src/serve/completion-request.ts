import { HttpError, invalidField } from './openai-errors.js';
import type { TextCodec } from './text-codec.js';

/**
 * The body of `POST /v1/completions`, checked field by field so a 400 names
 * the field (`param`) at fault. The prompt is token ids (an array of
 * integers) or text, which the model's tokenizer turns into ids; a batch
 * of one (`["text"]`, `[[1, 2, 3]]`) is accepted, larger batches are not.
 * Sampling fields OpenAI clients may send with their defaults (temperature,
 * top_p, user...) are ignored: the reference model's output is fixed by
 * the prompt and `seed`.
 */

export interface CompletionParams {
  readonly model: string;
  readonly promptTokens: readonly number[];
  /** true when the prompt was text (the response then decodes text too). */
  readonly promptWasText: boolean;
  readonly maxTokens: number;
  readonly stream: boolean;
  /** With stream: a last chunk carries `usage` (stream_options.include_usage). */
  readonly includeUsage: boolean;
  readonly seed: number;
  readonly cacheSalt: string | null;
}

export interface CompletionLimits {
  readonly modelName: string;
  readonly vocabSize: number;
  readonly maxModelLen: number;
  readonly codec: TextCodec | null;
}

/** OpenAI's default when max_tokens is left out. */
export const DEFAULT_MAX_TOKENS = 16;
const UINT32_MAX = 0xffffffff;

/** Fields this server cannot honour: given with a value other than their default, they are refused rather than ignored. */
const UNSUPPORTED: ReadonlyArray<readonly [string, (v: unknown) => boolean]> = [
  ['n', (v) => v === 1],
  ['best_of', (v) => v === 1],
  ['echo', (v) => v === false],
  ['logprobs', (v) => v === 0],
  ['suffix', (v) => v === ''],
  ['stop', (v) => Array.isArray(v) && v.length === 0],
];

export function parseCompletionRequest(body: unknown, limits: CompletionLimits): CompletionParams {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(400, 'invalid_request_error', 'the request body must be a JSON object', null, 'invalid_body');
  }
  const b = body as Record<string, unknown>;
  const model = b.model;
  if (typeof model !== 'string' || model.length === 0) throw invalidField('model', 'expected the model name, a non-empty string');
  if (model !== limits.modelName) {
    throw new HttpError(404, 'not_found_error', `model '${model}' does not exist here; this server serves '${limits.modelName}' (see GET /v1/models)`, 'model', 'model_not_found');
  }
  for (const [field, isDefault] of UNSUPPORTED) {
    const value = b[field];
    if (value !== undefined && value !== null && !isDefault(value)) throw invalidField(field, `is not supported by this server (got ${show(value)})`);
  }
  const { tokens, wasText } = promptTokens(b.prompt, limits);
  const maxTokens = b.max_tokens ?? b.max_completion_tokens ?? DEFAULT_MAX_TOKENS;
  const maxTokensField = b.max_tokens !== undefined && b.max_tokens !== null ? 'max_tokens' : 'max_completion_tokens';
  if (!Number.isSafeInteger(maxTokens) || (maxTokens as number) < 1) throw invalidField(maxTokensField, `expected an integer >= 1, got ${show(maxTokens)}`);
  if (tokens.length + (maxTokens as number) > limits.maxModelLen) {
    throw invalidField(
      maxTokensField,
      `the prompt's ${tokens.length} tokens + ${maxTokensField} ${String(maxTokens)} exceed the model's context length ${limits.maxModelLen}`,
    );
  }
  const stream = b.stream ?? false;
  if (typeof stream !== 'boolean') throw invalidField('stream', `expected true or false, got ${show(stream)}`);
  const seed = b.seed ?? 0;
  if (!Number.isSafeInteger(seed) || (seed as number) < 0 || (seed as number) > UINT32_MAX) {
    throw invalidField('seed', `expected an integer in [0, ${UINT32_MAX}], got ${show(seed)}`);
  }
  const salt = b.cache_salt ?? null;
  if (salt !== null && (typeof salt !== 'string' || salt.length === 0)) throw invalidField('cache_salt', `expected a non-empty string, got ${show(salt)}`);
  return {
    model,
    promptTokens: tokens,
    promptWasText: wasText,
    maxTokens: maxTokens as number,
    stream,
    includeUsage: stream && includeUsage(b.stream_options),
    seed: seed as number,
    cacheSalt: salt,
  };
}

function includeUsage(options: unknown): boolean {
  if (options === undefined || options === null) return false;
  if (typeof options !== 'object' || Array.isArray(options)) throw invalidField('stream_options', `expected an object, got ${show(options)}`);
  const value = (options as Record<string, unknown>).include_usage ?? false;
  if (typeof value !== 'boolean') throw invalidField('stream_options.include_usage', `expected true or false, got ${show(value)}`);
  return value;
}

function promptTokens(prompt: unknown, limits: CompletionLimits): { tokens: readonly number[]; wasText: boolean } {
  let p = prompt;
  // A batch of one prompt, as OpenAI's clients may send it.
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === 'string' || Array.isArray(p[0]))) p = p[0];
  else if (Array.isArray(p) && p.length > 1 && (typeof p[0] === 'string' || Array.isArray(p[0]))) {
    throw invalidField('prompt', `one prompt per request is supported, got a batch of ${p.length}`);
  }
  if (typeof p === 'string') {
    if (p.length === 0) throw invalidField('prompt', 'is empty');
    if (limits.codec === null) {
      throw invalidField('prompt', `text needs a tokenizer, and none matches this model's vocabulary of ${limits.vocabSize} ids: send token ids (an array of integers)`);
    }
    return { tokens: limits.codec.encode(p), wasText: true };
  }
  if (!Array.isArray(p)) throw invalidField('prompt', `expected text or an array of token ids, got ${show(p)}`);
  if (p.length === 0) throw invalidField('prompt', 'is empty; a prompt needs at least one token');
  for (let i = 0; i < p.length; i++) {
    const t: unknown = p[i];
    if (!Number.isSafeInteger(t) || (t as number) < 0 || (t as number) >= limits.vocabSize) {
      throw invalidField('prompt', `token ${i} = ${show(t)} is not a token id of this model (an integer in [0, ${limits.vocabSize}))`);
    }
  }
  return { tokens: p as number[], wasText: false };
}

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 37)}...` : value);
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}
