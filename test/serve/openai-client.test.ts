import { APIError, BadRequestError, NotFoundError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/serve/serve-app.js';
import { textCodecFor, type TextCodec } from '../../src/serve/text-codec.js';
import { TINY } from '../support/tiny.js';
import { cachedOf, openaiClient, referenceOutput, startTestServer, tokenIdsOf, tokenPrompt, until } from './helpers.js';

/**
 * `kvtier serve`'s API driven by OpenAI's official npm client, against a
 * server started in this process on an ephemeral loopback port.
 */

let server: RunningServer | null = null;

afterEach(async () => {
  await server?.close();
  server = null;
});

async function codec(): Promise<TextCodec> {
  const c = await textCodecFor(TINY.vocabSize);
  if (c === null) throw new Error('the tiny model has a tokenizer');
  return c;
}

const SYSTEM = 'You are kvtier, a careful assistant. Answer briefly, cite the block size when asked, and never invent numbers about caches or tiers. ';

describe('completions through the openai client', () => {
  it('a text prompt completes with the reference model\'s tokens, and text that decodes them', async () => {
    server = await startTestServer();
    const tokenizer = await codec();
    const prompt = 'Write one sentence about paged KV caches.';
    const completion = await openaiClient(server).completions.create({ model: 'tiny', prompt, max_tokens: 10, seed: 7 });
    const choice = completion.choices[0];
    expect(tokenIdsOf(choice)).toEqual(referenceOutput(tokenizer.encode(prompt), 10, 7));
    expect(choice.text).toBe(tokenizer.decode(tokenIdsOf(choice)));
    expect(choice.finish_reason).toBe('length');
    expect(completion.object).toBe('text_completion');
    expect(completion.usage).toMatchObject({ prompt_tokens: tokenizer.encode(prompt).length, completion_tokens: 10 });
  });

  it('a prompt of token ids completes with the reference model\'s tokens', async () => {
    server = await startTestServer();
    const prompt = tokenPrompt(50, 1);
    const completion = await openaiClient(server).completions.create({ model: 'tiny', prompt, max_tokens: 6, seed: 3 });
    expect(tokenIdsOf(completion.choices[0])).toEqual(referenceOutput(prompt, 6, 3));
  });

  it('a streamed completion carries the same tokens and text as the whole one, then usage', async () => {
    server = await startTestServer();
    const client = openaiClient(server);
    const prompt = 'Stream a short answer about offloading.';
    const whole = await client.completions.create({ model: 'tiny', prompt, max_tokens: 12, seed: 1 });
    const stream = await client.completions.create({ model: 'tiny', prompt, max_tokens: 12, seed: 1, stream: true, stream_options: { include_usage: true } });
    let text = '';
    const ids: number[] = [];
    const reasons: (string | null)[] = [];
    let usage: unknown = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        text += choice.text;
        ids.push(...tokenIdsOf(choice));
        reasons.push(choice.finish_reason);
      }
    }
    expect(ids).toEqual(tokenIdsOf(whole.choices[0]));
    expect(text).toBe(whole.choices[0].text);
    expect(reasons.at(-1)).toBe('length');
    expect(usage).toEqual(whole.usage);
  });

  it('with a stream interval, events carry at least that many tokens and add up to the whole completion', async () => {
    server = await startTestServer({ streamInterval: 4 });
    const client = openaiClient(server);
    const prompt = tokenPrompt(40, 9);
    const stream = await client.completions.create({ model: 'tiny', prompt, max_tokens: 10, stream: true });
    const sizes: number[] = [];
    const ids: number[] = [];
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        sizes.push(tokenIdsOf(choice).length);
        ids.push(...tokenIdsOf(choice));
      }
    }
    // Every event but the last holds at least the interval; tokens the front end received together (a step's
    // delivery that lagged) stay in one event, so how many events there are depends on the delivery's pace.
    expect(sizes.slice(0, -1).every((n) => n >= 4)).toBe(true);
    expect(sizes.length).toBeLessThanOrEqual(3);
    expect(ids).toEqual(referenceOutput(prompt, 10));
  });

  it('aborting a stream mid-way aborts its request on the server and frees its blocks', async () => {
    server = await startTestServer();
    const s = server;
    const stream = await openaiClient(s).completions.create({ model: 'tiny', prompt: tokenPrompt(40, 2), max_tokens: 3000, stream: true });
    let chunks = 0;
    for await (const _chunk of stream) {
      if (++chunks === 3) stream.controller.abort();
    }
    await until(() => s.serving.engine.metrics().requests.aborted === 1 && !s.serving.engine.hasPendingWork(), 'the server to abort the request');
    const metrics = s.serving.engine.metrics();
    expect(metrics.requests.finished).toBe(0);
    expect(metrics.leaks.gpuBlocks).toBe(0);
    expect(await (await fetch(`${s.url}/metrics`)).text()).toMatch(/^kvtier_serve_client_disconnects_total 1$/m);
  });

  it('concurrent conversations sharing a system prompt report its blocks as cached, per tier', async () => {
    server = await startTestServer();
    const client = openaiClient(server);
    const tokenizer = await codec();
    const warm = await client.completions.create({ model: 'tiny', prompt: `${SYSTEM}User: hello.`, max_tokens: 2 });
    expect(cachedOf(warm.usage).cached_tokens).toBe(0);
    const turns = ['User: what is a block?', 'User: what is a tier?', 'User: why offload?', 'User: what is a prefix hit?'];
    const answers = await Promise.all(turns.map((turn, i) => client.completions.create({ model: 'tiny', prompt: `${SYSTEM}${turn}`, max_tokens: 5, seed: i })));
    const blockSize = server.serving.engine.config.blockSize;
    answers.forEach((answer, i) => {
      const ids = tokenizer.encode(`${SYSTEM}${turns[i]}`);
      const shared = commonPrefix(ids, tokenizer.encode(`${SYSTEM}User: hello.`));
      const cached = cachedOf(answer.usage);
      expect(cached.cached_tokens).toBe(Math.floor(shared / blockSize) * blockSize);
      expect(cached.cached_tokens).toBeGreaterThan(0);
      expect(cached.cached_tokens_by_tier).toEqual({ gpu: cached.cached_tokens, cpu: 0, remote: 0 });
      expect(tokenIdsOf(answer.choices[0])).toEqual(referenceOutput(ids, 5, i));
    });
  });

  it('a cache_salt keeps requests from sharing cached blocks with other salts', async () => {
    server = await startTestServer();
    const client = openaiClient(server);
    const prompt = tokenPrompt(64, 3);
    await client.completions.create({ model: 'tiny', prompt, max_tokens: 2, cache_salt: 'tenant-a' } as never);
    const other = await client.completions.create({ model: 'tiny', prompt, max_tokens: 2, cache_salt: 'tenant-b' } as never);
    const same = await client.completions.create({ model: 'tiny', prompt, max_tokens: 2, cache_salt: 'tenant-a' } as never);
    expect(cachedOf(other.usage).cached_tokens).toBe(0);
    expect(cachedOf(same.usage).cached_tokens).toBeGreaterThan(0);
    expect(tokenIdsOf(other.choices[0])).toEqual(referenceOutput(prompt, 2));
  });

  it('bad requests are refused with 400 and a body naming the field', async () => {
    server = await startTestServer();
    const client = openaiClient(server);
    const error = await client.completions.create({ model: 'tiny', prompt: [1, 2, 40000], max_tokens: 3 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BadRequestError);
    expect((error as APIError).status).toBe(400);
    expect((error as APIError).error).toMatchObject({ type: 'invalid_request_error', param: 'prompt', code: 'invalid_value' });
    expect((error as APIError).message).toMatch(/token 2 = 40000/);
    const tooLong = await client.completions.create({ model: 'tiny', prompt: [1], max_tokens: 1_000_000 }).catch((e: unknown) => e);
    expect((tooLong as APIError).error).toMatchObject({ param: 'max_tokens' });
    const unknownModel = await client.completions.create({ model: 'gpt-4', prompt: [1], max_tokens: 1 }).catch((e: unknown) => e);
    expect(unknownModel).toBeInstanceOf(NotFoundError);
    expect((unknownModel as APIError).error).toMatchObject({ param: 'model', code: 'model_not_found' });
  });

  it('lists the served model', async () => {
    server = await startTestServer({ modelName: 'kvtier-tiny' });
    const models = await openaiClient(server).models.list();
    expect(models.data.map((m) => m.id)).toEqual(['kvtier-tiny']);
  });
});

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}
