import { afterEach, describe, expect, it } from 'vitest';
import { serveCommand } from '../../src/cli/serve-command.js';
import { serveConfigFromCommand } from '../../src/cli/serve-config.js';
import { createServeCommand } from '../../src/cli/serve-flags.js';
import { FrontendThreadError } from '../../src/serve/errors.js';
import { FrontendHost } from '../../src/serve/frontend/frontend-host.js';
import { MAX_SALT_CHARS } from '../../src/serve/frontend/arrival-ring.js';
import { MIN_RING_WORDS } from '../../src/serve/frontend/token-ring.js';
import type { RunningServer } from '../../src/serve/serve-app.js';
import { openaiClient, postJson, referenceOutput, startTestServer, tokenIdsOf, tokenPrompt, until } from './helpers.js';

/**
 * The HTTP server on its front-end thread (the default): tokens cross from
 * the engine's thread through the token ring, completions through the
 * arrival ring, aborts by
 * message; the thread's death is reported, never a hang.
 */

let server: RunningServer | null = null;

afterEach(async () => {
  await server?.close();
  server = null;
});

function frontendOf(s: RunningServer): FrontendHost {
  expect(s.http).toBeInstanceOf(FrontendHost);
  return s.http as FrontendHost;
}

/** Streams a completion with the openai client; the token ids of its events, in order. */
async function streamedIds(s: RunningServer, prompt: number[], maxTokens: number): Promise<number[]> {
  const stream = await openaiClient(s).completions.create({ model: 'tiny', prompt, max_tokens: maxTokens, stream: true });
  const ids: number[] = [];
  for await (const chunk of stream) for (const choice of chunk.choices) ids.push(...tokenIdsOf(choice));
  return ids;
}

describe('the HTTP front-end thread', () => {
  it('streams of many times more tokens than the ring holds arrive whole and in order', async () => {
    server = await startTestServer({ ringWords: MIN_RING_WORDS });
    const s = server;
    frontendOf(s);
    const prompts = [1, 2, 3].map((seed) => tokenPrompt(20, seed));
    const outputs = await Promise.all(prompts.map((prompt) => streamedIds(s, prompt, 300)));
    outputs.forEach((ids, i) => expect(ids).toEqual(referenceOutput(prompts[i], 300)));
    const whole = await openaiClient(s).completions.create({ model: 'tiny', prompt: prompts[0], max_tokens: 300 });
    expect(tokenIdsOf(whole.choices[0])).toEqual(referenceOutput(prompts[0], 300));
    expect(whole.usage?.completion_tokens).toBe(300);
  });

  it('completions with and without a cache salt reach the engine through the arrival ring and finish with their reference outputs; an overlong salt is refused naming cache_salt', async () => {
    server = await startTestServer();
    const s = server;
    const prompts = Array.from({ length: 24 }, (_, i) => tokenPrompt(16 + i, 60 + i));
    const outputs = await Promise.all(
      prompts.map(async (prompt, i) => {
        const { status, body } = await postJson(`${s.url}/v1/completions`, { model: 'tiny', prompt, max_tokens: 4, ...(i % 2 === 0 ? { cache_salt: `tenant-${i % 3}` } : {}) });
        expect(status).toBe(200);
        return tokenIdsOf((body as { choices: unknown[] }).choices[0]);
      }),
    );
    outputs.forEach((ids, i) => expect(ids).toEqual(referenceOutput(prompts[i], 4)));
    const { status, body } = await postJson(`${s.url}/v1/completions`, { model: 'tiny', prompt: tokenPrompt(8, 90), max_tokens: 2, cache_salt: 'x'.repeat(MAX_SALT_CHARS + 1) });
    expect(status).toBe(400);
    expect(body).toMatchObject({ error: { param: 'cache_salt', type: 'invalid_request_error' } });
  });

  it('a client that disconnects aborts its request on the engine, which frees its blocks', async () => {
    server = await startTestServer();
    const s = server;
    const stream = await openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(40, 7), max_tokens: 3000, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    stream.controller.abort();
    await until(() => s.serving.engine.metrics().requests.aborted === 1 && s.serving.inFlight === 0 && !s.serving.engine.hasPendingWork(), 'the engine to abort the request');
    expect(s.serving.engine.metrics().leaks.gpuBlocks).toBe(0);
  });

  it("/metrics joins the engine thread's metrics and the front end's own counters", async () => {
    server = await startTestServer();
    const s = server;
    await openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(20, 8), max_tokens: 3 });
    const refused = await postJson(`${s.url}/v1/completions`, { model: 'tiny', prompt: [] });
    expect(refused.status).toBe(400);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    // The engine's registry and the serving gauges (main thread)...
    expect(metrics).toMatch(/^kvtier_steps_total [1-9]/m);
    expect(metrics).toMatch(/^kvtier_serve_requests_in_flight 0$/m);
    // ...and the HTTP server's counters (front-end thread).
    expect(metrics).toMatch(/^kvtier_serve_responses_total\{status="200"\} 1$/m);
    expect(metrics).toMatch(/^kvtier_serve_responses_total\{status="400"\} 1$/m);
  });

  it("the front-end thread's death settles failed with a FrontendThreadError and aborts the requests it had sent", async () => {
    server = await startTestServer();
    const s = server;
    const stream = await openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(30, 9), max_tokens: 3000, stream: true });
    await stream[Symbol.asyncIterator]().next();
    void frontendOf(s).thread.terminate();
    const failure = await s.failed;
    expect(failure).toBeInstanceOf(FrontendThreadError);
    expect((failure as FrontendThreadError).code).toBe('ERR_KVTIER_FRONTEND_THREAD');
    expect((failure as Error).message).toMatch(/HTTP front-end thread exited unexpectedly/);
    await until(() => s.serving.inFlight === 0 && !s.serving.engine.hasPendingWork(), 'the engine to abort the orphaned request');
    expect(s.serving.engine.metrics().requests.aborted).toBe(1);
  });

  it('kvtier serve ends with exit code 1 and says why when its front-end thread dies', async () => {
    const command = createServeCommand();
    command.parse(['--backend', 'host', '--tp', '2', '--gpu-blocks', '128', '--compute-ns-per-token', '0', '--port', '0'], { from: 'user' });
    const lines: string[] = [];
    const code = await serveCommand(serveConfigFromCommand(command), {
      write: (line) => lines.push(line),
      onListening: (running) => void (running.http as FrontendHost).thread.terminate(),
    });
    expect(code).toBe(1);
    expect(lines.join('')).toMatch(/kvtier: the HTTP front-end thread exited unexpectedly/);
  });

  it('with httpThread false the server runs on the engine thread and serves the same completions', async () => {
    server = await startTestServer({ httpThread: false });
    expect(server.http).not.toBeInstanceOf(FrontendHost);
    const prompt = tokenPrompt(25, 10);
    expect(await streamedIds(server, prompt, 12)).toEqual(referenceOutput(prompt, 12));
  });
});
