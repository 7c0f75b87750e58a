import { RateLimitError, type APIError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/serve/serve-app.js';
import { openaiClient, postJson, startTestServer, tokenPrompt, until } from './helpers.js';

/**
 * The server's refusals in OpenAI's error format: 400 for bad input, 429
 * when the waiting queue is full, 503 while draining; and its plain routes.
 */

let server: RunningServer | null = null;

afterEach(async () => {
  await server?.close();
  server = null;
});

/** A stream that runs until it is aborted: it holds the engine's one running slot in the tests below. */
async function longStream(s: RunningServer, seed: number) {
  const stream = await openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(24, seed), max_tokens: 3000, stream: true });
  const iterator = stream[Symbol.asyncIterator]();
  await iterator.next();
  return stream;
}

function errorBody(body: unknown): Record<string, unknown> {
  return (body as { error: Record<string, unknown> }).error;
}

describe('HTTP status codes and error bodies', () => {
  it('400 names the field for malformed JSON, a wrong type and an unsupported option', async () => {
    server = await startTestServer();
    const url = `${server.url}/v1/completions`;
    const notJson = await fetch(url, { method: 'POST', body: '{"model":' });
    expect(notJson.status).toBe(400);
    expect(errorBody(await notJson.json())).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json', param: null });
    const wrongType = await postJson(url, { model: 'tiny', prompt: [1, 2], max_tokens: 'ten' });
    expect(wrongType.status).toBe(400);
    expect(errorBody(wrongType.body)).toEqual({
      message: 'max_tokens: expected an integer >= 1, got "ten"',
      type: 'invalid_request_error',
      param: 'max_tokens',
      code: 'invalid_value',
    });
    const batch = await postJson(url, { model: 'tiny', prompt: ['a', 'b'] });
    expect(errorBody(batch.body)).toMatchObject({ param: 'prompt' });
    const n = await postJson(url, { model: 'tiny', prompt: [1], n: 2 });
    expect(errorBody(n.body)).toMatchObject({ param: 'n' });
    const salt = await postJson(url, { model: 'tiny', prompt: [1], cache_salt: 5 });
    expect(errorBody(salt.body)).toMatchObject({ param: 'cache_salt' });
  });

  it('429 with a rate_limit_error body once the waiting queue is full', async () => {
    server = await startTestServer({ maxWaiting: 1, engine: { maxNumSeqs: 1 } });
    const s = server;
    const holder = await longStream(s, 1);
    // The one running slot is taken: this request waits, filling the queue.
    const waiting = openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(20, 2), max_tokens: 2 });
    await until(() => s.serving.waiting === 1, 'the second request to wait');
    const refused = await openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(20, 3), max_tokens: 2 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimitError);
    expect((refused as APIError).status).toBe(429);
    expect((refused as APIError).error).toMatchObject({ type: 'rate_limit_error', code: 'ERR_KVTIER_QUEUE_FULL', param: null });
    holder.controller.abort();
    expect((await waiting).choices[0].finish_reason).toBe('length');
  });

  it('503 for new completions while draining; the request in flight ends with an error event at the deadline', async () => {
    server = await startTestServer();
    const s = server;
    const stream = await openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(24, 4), max_tokens: 3000, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    // No deadline can pass during the test: it ends when the test aborts it.
    const drained = s.http.drain(3_600_000);
    const refused = await postJson(`${s.url}/v1/completions`, { model: 'tiny', prompt: [1, 2, 3], max_tokens: 2 });
    expect(refused.status).toBe(503);
    expect(errorBody(refused.body)).toMatchObject({ type: 'service_unavailable_error', code: 'ERR_KVTIER_DRAINING' });
    const health = await fetch(`${s.url}/health`);
    expect(health.status).toBe(503);
    stream.controller.abort();
    expect(await drained).toEqual({ finished: 0, aborted: 1 });
  });

  it('a stream cut by the drain deadline ends with an error event the client raises', async () => {
    server = await startTestServer();
    const s = server;
    const stream = await openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(24, 5), max_tokens: 3000, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const drained = s.http.drain(0);
    const error = await (async () => {
      for (;;) if ((await iterator.next()).done) return null;
    })().catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/drain deadline 0 ms/);
    expect(await drained).toEqual({ finished: 0, aborted: 1 });
  });

  it('health, models and metrics answer; unknown routes get a 404 body', async () => {
    server = await startTestServer();
    expect(await (await fetch(`${server.url}/health`)).json()).toEqual({ status: 'ok' });
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/^kvtier_steps_total /m);
    expect(metrics).toMatch(/^kvtier_serve_requests_in_flight 0$/m);
    const missing = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(404);
    expect(errorBody(await missing.json())).toMatchObject({ type: 'not_found_error' });
    const wrongMethod = await fetch(`${server.url}/v1/completions`);
    expect(wrongMethod.status).toBe(405);
  });

  it('with verify, /metrics counts finished requests checked against the reference model', async () => {
    server = await startTestServer({ verify: true });
    const s = server;
    await Promise.all([1, 2, 3].map((seed) => openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(30, seed), max_tokens: 4 })));
    await until(() => (s.verifyCounts()?.checked ?? 0) === 3, 'three checks');
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/^kvtier_serve_verified_total 3$/m);
    expect(metrics).toMatch(/^kvtier_serve_verify_mismatches_total 0$/m);
  });
});
