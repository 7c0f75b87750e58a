import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { SseWriter } from '../../src/serve/sse-writer.js';

/**
 * The stream interval's contract, at the writer that applies it: an event
 * goes out once the tokens held reach the interval, carrying every token
 * held (tokens delivered together stay in one event, as vLLM's interval is
 * a buffer size); the last event carries what is left.
 */

/** A response with no socket of its own: every event goes through write(), where this collects it. */
function collectingResponse(): { response: ServerResponse; events: () => number[][] } {
  let written = '';
  const response = {
    socket: null,
    chunkedEncoding: false,
    destroyed: false,
    writableLength: 0,
    write(chunk: string) {
      written += chunk;
      return true;
    },
  } as unknown as ServerResponse;
  return { response, events: () => tokenIdsPerEvent(written) };
}

function tokenIdsPerEvent(stream: string): number[][] {
  return stream
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)) as { choices: { token_ids?: number[] }[] })
    .filter((e) => e.choices.length > 0)
    .map((e) => e.choices[0].token_ids ?? []);
}

function writer(response: ServerResponse, interval: number): SseWriter {
  return new SseWriter(response, { id: 'cmpl-1', created: 0, model: 'tiny' }, null, interval, false);
}

const finished = (outputTokens: number[]) => ({ promptTokens: [1, 2, 3], outputTokens, finishReason: 'length', remoteHitTokens: 0 }) as never;

describe('the stream interval', () => {
  it('tokens delivered one a step go out as events of the interval, the last with what is left', () => {
    const { response, events } = collectingResponse();
    const sse = writer(response, 4);
    const tokens = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19];
    for (const t of tokens) sse.onTokens([t]);
    response.write(sse.tail(finished(tokens), false));
    expect(events()).toEqual([[10, 11, 12, 13], [14, 15, 16, 17], [18, 19]]);
  });

  it('tokens delivered together stay in one event once they reach the interval', () => {
    const { response, events } = collectingResponse();
    const sse = writer(response, 4);
    const tokens = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19];
    sse.onTokens(tokens.slice(0, 2));
    sse.onTokens(tokens.slice(2, 9));
    sse.onTokens(tokens.slice(9));
    response.write(sse.tail(finished(tokens), false));
    expect(events()).toEqual([[10, 11, 12, 13, 14, 15, 16, 17, 18], [19]]);
  });
});
