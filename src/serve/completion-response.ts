import type { CompletionOutcome } from './completion-backend.js';

/**
 * Response bodies of `POST /v1/completions` in OpenAI's format. Two fields
 * are kvtier's own, beside OpenAI's: `token_ids` in each choice (the output
 * as token ids: text is their decoding, and a model without a tokenizer has
 * token ids only) and `prompt_tokens_details.cached_tokens_by_tier` in
 * `usage`: how many of `cached_tokens` each tier served (GPU prefix cache,
 * CPU tier, and the part of the CPU tier's that the remote tier filled:
 * gpu + cpu + remote = cached_tokens).
 */

export interface CompletionUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
  readonly prompt_tokens_details: {
    readonly cached_tokens: number;
    readonly cached_tokens_by_tier: { readonly gpu: number; readonly cpu: number; readonly remote: number };
  };
}

export type OpenAiFinishReason = 'length' | 'stop';

export interface CompletionHeader {
  readonly id: string;
  readonly created: number;
  readonly model: string;
}

export function usageOf(finished: CompletionOutcome): CompletionUsage {
  const prompt = finished.promptTokens.length;
  const completion = finished.outputTokens.length;
  const remote = finished.remoteHitTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: {
      cached_tokens: finished.gpuPrefixHitTokens + finished.cpuTierHitTokens,
      cached_tokens_by_tier: { gpu: finished.gpuPrefixHitTokens, cpu: finished.cpuTierHitTokens - remote, remote },
    },
  };
}

export function openAiFinishReason(finished: CompletionOutcome): OpenAiFinishReason {
  return finished.finishReason === 'stopped' ? 'stop' : 'length';
}

export function completionBody(header: CompletionHeader, finished: CompletionOutcome, text: string): object {
  return {
    id: header.id,
    object: 'text_completion',
    created: header.created,
    model: header.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: openAiFinishReason(finished), token_ids: finished.outputTokens }],
    usage: usageOf(finished),
  };
}

/**
 * One server-sent event of a streamed completion. Built as text around the
 * JSON-escaped delta, since a stream writes one per token: the only
 * variable parts are the text, the token ids and the finish reason.
 */
export function chunkEvent(prefix: string, text: string, tokenIds: readonly number[], finishReason: OpenAiFinishReason | null, usageNull: boolean): string {
  return chunkEventHead(prefix) + chunkEventRest(text, tokenIds, finishReason, usageNull);
}

/** The part of every chunk event before its text, constant per request: `data: {...,"choices":[{"index":0,"text":`. */
export function chunkEventHead(prefix: string): string {
  return `data: ${prefix}"choices":[{"index":0,"text":`;
}

/** The part of a chunk event from its text on. */
export function chunkEventRest(text: string, tokenIds: readonly number[], finishReason: OpenAiFinishReason | null, usageNull: boolean): string {
  const reason = finishReason === null ? 'null' : `"${finishReason}"`;
  return `${JSON.stringify(text)},"logprobs":null,"finish_reason":${reason},"token_ids":[${tokenIds.join(',')}]}]${usageNull ? ',"usage":null' : ''}}\n\n`;
}

/** The fixed start of every chunk's JSON: `{"id":...,"object":...,"created":...,"model":...,` */
export function chunkPrefix(header: CompletionHeader): string {
  return `{"id":${JSON.stringify(header.id)},"object":"text_completion","created":${header.created},"model":${JSON.stringify(header.model)},`;
}

/** The last data chunk with stream_options.include_usage: no choices, the usage. */
export function usageEvent(prefix: string, finished: CompletionOutcome): string {
  return `data: ${prefix}"choices":[],"usage":${JSON.stringify(usageOf(finished))}}\n\n`;
}

export const DONE_EVENT = 'data: [DONE]\n\n';
