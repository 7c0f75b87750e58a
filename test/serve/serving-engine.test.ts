import { afterEach, describe, expect, it } from 'vitest';
import { QueueFullError, RequestAbortedError, ServingClosedError } from '../../src/serve/errors.js';
import { ServingEngine, type RequestSource } from '../../src/serve/serving-engine.js';
import type { RequestEndSink, StepTokenSink } from '../../src/serve/step-token-sink.js';
import type { FinishedRequest } from '../../src/runtime/engine-types.js';
import type { RequestStream } from '../../src/serve/request-stream.js';
import { RequestError } from '../../src/core/errors.js';
import { referenceOutput, TEST_ENGINE, tokenPrompt, until } from './helpers.js';

let serving: ServingEngine | null = null;

afterEach(async () => {
  await serving?.close();
  serving = null;
});

async function startServing(options: ConstructorParameters<typeof ServingEngine>[1] = {}, engine: object = {}): Promise<ServingEngine> {
  serving = await ServingEngine.create({ ...TEST_ENGINE, ...engine }, {}, options);
  return serving;
}

/** Blocks of an aborted request may be held until its stores to the CPU tier complete, a step or two later. */
async function untilIdle(s: ServingEngine): Promise<void> {
  await until(() => !s.engine.hasPendingWork(), 'the engine to go idle');
}

async function collect(stream: AsyncIterable<number>): Promise<number[]> {
  const tokens: number[] = [];
  for await (const token of stream) tokens.push(token);
  return tokens;
}

describe('the serving engine', () => {
  it('generate resolves with the finished request, its output the reference model\'s', async () => {
    const s = await startServing();
    const prompt = tokenPrompt(40, 1);
    const finished = await s.generate({ promptTokens: prompt, maxTokens: 12, seed: 5 });
    expect(finished.finishReason).toBe('length');
    expect(finished.outputTokens).toEqual(referenceOutput(prompt, 12, 5));
  });

  it('stream yields the same tokens in order, and its result is the finished request', async () => {
    const s = await startServing();
    const prompt = tokenPrompt(33, 2);
    const stream = s.stream({ promptTokens: prompt, maxTokens: 9 });
    expect(await collect(stream)).toEqual(referenceOutput(prompt, 9));
    expect((await stream.result).outputTokens).toEqual(referenceOutput(prompt, 9));
  });

  it('concurrent requests all finish with their reference outputs', async () => {
    const s = await startServing();
    const prompts = Array.from({ length: 12 }, (_, i) => tokenPrompt(20 + i, 10 + i));
    const finished = await Promise.all(prompts.map((p, i) => s.generate({ promptTokens: p, maxTokens: 5 + i, seed: i })));
    finished.forEach((f, i) => expect(f.outputTokens).toEqual(referenceOutput(prompts[i], 5 + i, i)));
  });

  it('an idle loop takes no steps, and a request added later wakes it', async () => {
    const s = await startServing();
    await s.generate({ promptTokens: tokenPrompt(16, 3), maxTokens: 3 });
    await untilIdle(s);
    const idleSteps = s.engine.metrics().steps;
    // Many turns of the event loop with nothing to do: a spinning loop would step through them.
    for (let i = 0; i < 200; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(s.engine.metrics().steps).toBe(idleSteps);
    const later = await s.generate({ promptTokens: tokenPrompt(16, 4), maxTokens: 4 });
    expect(later.outputTokens).toEqual(referenceOutput(tokenPrompt(16, 4), 4));
  });

  it('aborting the signal ends the request with RequestAbortedError and frees its blocks', async () => {
    const s = await startServing();
    const controller = new AbortController();
    const stream = s.stream({ promptTokens: tokenPrompt(64, 5), maxTokens: 3000 }, { signal: controller.signal });
    const first = await stream.next();
    expect(first.done).toBe(false);
    controller.abort();
    const error = await stream.result.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestAbortedError);
    expect((error as RequestAbortedError).code).toBe('ERR_KVTIER_ABORTED');
    // Tokens generated before the abort are still read, then the error.
    await expect(collect(stream)).rejects.toBe(error);
    await untilIdle(s);
    const metrics = s.engine.metrics();
    expect(metrics.requests.aborted).toBe(1);
    expect(metrics.leaks.gpuBlocks).toBe(0);
    expect(s.inFlight).toBe(0);
  });

  it('breaking out of a stream aborts its request', async () => {
    const s = await startServing();
    const stream = s.stream({ promptTokens: tokenPrompt(20, 6), maxTokens: 3000 });
    for await (const _token of stream) break;
    await expect(stream.result).rejects.toBeInstanceOf(RequestAbortedError);
    await untilIdle(s);
    expect(s.engine.metrics().requests.aborted).toBe(1);
    expect(s.engine.metrics().leaks.gpuBlocks).toBe(0);
  });

  it('a token sink attached after the first tokens gets every token in order, step by step, beside the iterator', async () => {
    const s = await startServing();
    const prompt = tokenPrompt(30, 21);
    const stream = s.stream({ promptTokens: prompt, maxTokens: 10 });
    expect((await stream.next()).done).toBe(false);
    const deliveries: number[][] = [];
    stream.attach({ onTokens: (tokens) => deliveries.push([...tokens]) });
    await stream.result;
    expect(deliveries.flat()).toEqual(referenceOutput(prompt, 10));
    // The first delivery replays what came before the sink; each later one is a step's tokens.
    expect(deliveries.length).toBeGreaterThan(1);
    expect(await collect(stream)).toEqual(referenceOutput(prompt, 10).slice(1));
  });

  it('a token sink that throws aborts its own request only; the others finish', async () => {
    const s = await startServing();
    const failing = s.stream({ promptTokens: tokenPrompt(24, 22), maxTokens: 3000 });
    failing.attach({
      onTokens: () => {
        throw new Error('sink failed');
      },
    });
    const other = s.generate({ promptTokens: tokenPrompt(24, 23), maxTokens: 6 });
    await expect(failing.result).rejects.toBeInstanceOf(RequestAbortedError);
    expect((await other).outputTokens).toEqual(referenceOutput(tokenPrompt(24, 23), 6));
    await untilIdle(s);
    expect(s.engine.metrics().leaks.gpuBlocks).toBe(0);
  });

  it('a step sink gets each of its requests\' tokens by key, in one pass per step opened and closed around it', async () => {
    const s = await startServing();
    const prompts = [tokenPrompt(30, 40), tokenPrompt(26, 41), tokenPrompt(22, 42)];
    const received = new Map<number, number[]>();
    const calls: string[] = [];
    let open = false;
    const sink: StepTokenSink = {
      beginStep: (requests) => {
        expect(open).toBe(false);
        open = true;
        calls.push(`begin ${requests}`);
      },
      tokens: (key, tokens) => {
        expect(open).toBe(true);
        received.set(key, [...(received.get(key) ?? []), ...tokens]);
      },
      endStep: () => {
        open = false;
        calls.push('end');
      },
    };
    const ends = keyedSinks();
    prompts.forEach((promptTokens, i) => s.submit({ promptTokens, maxTokens: 7 + i }, 100 + i, sink, ends.ends));
    await until(() => ends.finished.size === prompts.length, 'every request to finish');
    prompts.forEach((prompt, i) => {
      expect(received.get(100 + i)).toEqual(referenceOutput(prompt, 7 + i));
      expect(ends.finished.get(100 + i)?.outputTokens).toEqual(received.get(100 + i));
    });
    expect(open).toBe(false);
    expect(calls.filter((c) => c === 'end').length).toBe(calls.filter((c) => c.startsWith('begin')).length);
  });

  it('each step sink is opened once per step while it has requests in flight, and no more once its last has ended', async () => {
    const s = await startServing();
    const steps = new Map<string, number>();
    const lastTokenStep = new Map<string, number>();
    const sinkNamed = (name: string): StepTokenSink => ({
      beginStep: () => steps.set(name, (steps.get(name) ?? 0) + 1),
      tokens: () => lastTokenStep.set(name, steps.get(name) ?? 0),
      endStep: () => {},
    });
    const short = sinkNamed('short');
    const long = sinkNamed('long');
    const ends = keyedSinks();
    // Two requests each: the short sink's end after 3 tokens, the long sink's after 12.
    s.submit({ promptTokens: tokenPrompt(20, 50), maxTokens: 3 }, 1, short, ends.ends);
    s.submit({ promptTokens: tokenPrompt(21, 51), maxTokens: 3 }, 2, short, ends.ends);
    s.submit({ promptTokens: tokenPrompt(22, 52), maxTokens: 12 }, 3, long, ends.ends);
    s.submit({ promptTokens: tokenPrompt(23, 53), maxTokens: 12 }, 4, long, ends.ends);
    await until(() => ends.finished.size === 4, 'every request to finish');
    // The short sink was opened up to the step of its last token, and never after it.
    expect(steps.get('short')).toBe(lastTokenStep.get('short'));
    expect(steps.get('long')).toBeGreaterThan(steps.get('short')!);
    expect(steps.get('long')).toBe(lastTokenStep.get('long'));
  });

  it('a step sink that takes single tokens as numbers gets every one-token step that way, and the same tokens in order', async () => {
    const s = await startServing();
    const prompts = [tokenPrompt(30, 60), tokenPrompt(24, 61)];
    const received = new Map<number, number[]>();
    let asNumbers = 0;
    let asArrays = 0;
    const sink: StepTokenSink = {
      beginStep: () => {},
      tokens: (key, tokens) => {
        asArrays++;
        received.set(key, [...(received.get(key) ?? []), ...tokens]);
      },
      token: (key, token) => {
        asNumbers++;
        received.set(key, [...(received.get(key) ?? []), token]);
      },
      endStep: () => {},
    };
    const ends = keyedSinks();
    prompts.forEach((promptTokens, i) => s.submit({ promptTokens, maxTokens: 6 }, 20 + i, sink, ends.ends));
    await until(() => ends.finished.size === prompts.length, 'both requests to finish');
    prompts.forEach((prompt, i) => expect(received.get(20 + i)).toEqual(referenceOutput(prompt, 6)));
    // Each step gives each request one token, its last (finishing) step's included.
    expect(asNumbers).toBe(12);
    expect(asArrays).toBe(0);
  });

  it('a step sink that throws for one request aborts that request only; its other requests finish', async () => {
    const s = await startServing();
    const received: number[] = [];
    const sink: StepTokenSink = {
      beginStep: () => {},
      tokens: (key, tokens) => {
        if (key === 1) throw new Error('no room for 1');
        received.push(...tokens);
      },
      endStep: () => {},
    };
    const ends = keyedSinks();
    s.submit({ promptTokens: tokenPrompt(24, 43), maxTokens: 3000 }, 1, sink, ends.ends);
    const prompt = tokenPrompt(24, 44);
    s.submit({ promptTokens: prompt, maxTokens: 6 }, 2, sink, ends.ends);
    await until(() => ends.failed.has(1) && ends.finished.has(2), 'one request to fail and the other to finish');
    expect(String(ends.failed.get(1))).toMatch(/its token sink failed: no room for 1/);
    expect(ends.finished.get(2)?.outputTokens).toEqual(referenceOutput(prompt, 6));
    expect(received).toEqual(referenceOutput(prompt, 6));
    await untilIdle(s);
    expect(s.engine.metrics().leaks.gpuBlocks).toBe(0);
  });

  it('a step sink that throws when a step opens aborts all of its requests', async () => {
    const s = await startServing();
    const sink: StepTokenSink = {
      beginStep: () => {
        throw new Error('closed');
      },
      tokens: () => {},
      endStep: () => {},
    };
    const ends = keyedSinks();
    for (const key of [1, 2]) s.submit({ promptTokens: tokenPrompt(24, 44 + key), maxTokens: 3000 }, key, sink, ends.ends);
    await until(() => ends.failed.size === 2, 'both requests to fail');
    for (const key of [1, 2]) expect(String(ends.failed.get(key))).toMatch(/its token sink failed: closed/);
    await untilIdle(s);
    expect(s.engine.metrics().requests.aborted).toBe(2);
  });

  /** A step sink that keeps each key's tokens, and an end sink that keeps how each key ended. */
  function keyedSinks() {
    const tokens = new Map<number, number[]>();
    const finished = new Map<number, FinishedRequest>();
    const failed = new Map<number, unknown>();
    const step: StepTokenSink = { beginStep: () => {}, tokens: (key, t) => tokens.set(key, [...(tokens.get(key) ?? []), ...t]), endStep: () => {} };
    const ends: RequestEndSink = { finished: (key, f) => finished.set(key, f), failed: (key, error) => failed.set(key, error) };
    return { tokens, finished, failed, step, ends };
  }

  it('submit hands each request\'s tokens to its step sink and its end to its end sink, by key', async () => {
    const s = await startServing();
    const sinks = keyedSinks();
    const prompts = [tokenPrompt(30, 50), Int32Array.from(tokenPrompt(26, 51))];
    const ids = prompts.map((promptTokens, i) => s.submit({ promptTokens, maxTokens: 5 + i }, 7 + i, sinks.step, sinks.ends));
    await until(() => sinks.finished.size === 2, 'both submitted requests to finish');
    prompts.forEach((prompt, i) => {
      const expected = referenceOutput(Array.from(prompt), 5 + i);
      expect(sinks.tokens.get(7 + i)).toEqual(expected);
      expect(sinks.finished.get(7 + i)?.id).toBe(ids[i]);
      expect(sinks.finished.get(7 + i)?.outputTokens).toEqual(expected);
    });
    expect(sinks.failed.size).toBe(0);
    expect(s.inFlight).toBe(0);
  });

  it('a submitted request aborted by id ends at its end sink with RequestAbortedError, and drain counts it', async () => {
    const s = await startServing();
    const sinks = keyedSinks();
    const id = s.submit({ promptTokens: tokenPrompt(30, 52), maxTokens: 3000 }, 3, sinks.step, sinks.ends);
    await until(() => (sinks.tokens.get(3)?.length ?? 0) > 0, 'the first token');
    expect(s.abort(id, 'the client closed the connection')).toBe(true);
    await until(() => sinks.failed.has(3), 'the abort to reach the end sink');
    expect(sinks.failed.get(3)).toBeInstanceOf(RequestAbortedError);
    expect(String(sinks.failed.get(3))).toMatch(/was aborted: the client closed the connection/);
    const running = s.submit({ promptTokens: tokenPrompt(30, 53), maxTokens: 3000 }, 4, sinks.step, sinks.ends);
    expect(running).not.toBe(id);
    await until(() => (sinks.tokens.get(4)?.length ?? 0) > 0, 'the second request\'s first token');
    expect(await s.drain(0)).toEqual({ finished: 0, aborted: 1 });
    expect(sinks.failed.get(4)).toBeInstanceOf(RequestAbortedError);
    expect(sinks.finished.size).toBe(0);
    await untilIdle(s);
    expect(s.engine.metrics().leaks.gpuBlocks).toBe(0);
  });

  it('submit refuses at once, with nothing queued, a request the engine refuses and a full queue', async () => {
    const s = await startServing({ maxWaiting: 1 });
    const sinks = keyedSinks();
    expect(() => s.submit({ promptTokens: [], maxTokens: 2 }, 1, sinks.step, sinks.ends)).toThrow(RequestError);
    s.submit({ promptTokens: tokenPrompt(20, 54), maxTokens: 2 }, 2, sinks.step, sinks.ends);
    expect(() => s.submit({ promptTokens: tokenPrompt(20, 55), maxTokens: 2 }, 3, sinks.step, sinks.ends)).toThrow(QueueFullError);
    expect(s.inFlight).toBe(1);
    await until(() => sinks.finished.has(2), 'the queued request to finish');
    expect(sinks.failed.size).toBe(0);
  });

  it('refuses a submitted request whose key is not a number, queueing nothing', async () => {
    const s = await startServing();
    const sinks = keyedSinks();
    const spec = { promptTokens: tokenPrompt(8, 47), maxTokens: 2 };
    expect(() => s.submit(spec, Number.NaN, sinks.step, sinks.ends)).toThrow(/key: expected a number/);
    expect(() => s.submit(spec, '3' as unknown as number, sinks.step, sinks.ends)).toThrow(/key: expected a number/);
    expect(s.inFlight).toBe(0);
  });

  it('a request source is polled at step boundaries while the loop steps, and wakes the loop itself while it sleeps', async () => {
    const s = await startServing();
    const queued: { promptTokens: number[]; maxTokens: number }[] = [];
    const streams: RequestStream[] = [];
    let asleep = false;
    const source: RequestSource = {
      poll: () => {
        for (const spec of queued.splice(0)) streams.push(s.stream(spec));
      },
      sleeping: () => {
        asleep = true;
        source.poll();
      },
      awake: () => {
        asleep = false;
      },
    };
    const remove = s.addSource(source);
    // Registered with a sleeping loop: told so at once.
    expect(asleep).toBe(true);
    // While the loop sleeps the source submits on its own (as a wake message makes it): a long request keeps the loop stepping.
    queued.push({ promptTokens: tokenPrompt(20, 50), maxTokens: 3000 });
    source.poll();
    expect(s.inFlight).toBe(1);
    await until(() => s.engine.metrics().steps > 0 && !asleep, 'the loop to step');
    // While it steps, nothing but its polls submits this one.
    const prompt = tokenPrompt(22, 51);
    queued.push({ promptTokens: prompt, maxTokens: 4 });
    await until(() => streams.length === 2, 'the loop to poll the source');
    expect((await streams[1].result).outputTokens).toEqual(referenceOutput(prompt, 4));
    s.abort(streams[0].id, 'done');
    await expect(streams[0].result).rejects.toBeInstanceOf(RequestAbortedError);
    await untilIdle(s);
    await until(() => asleep, 'the loop to sleep and say so');
    remove();
  });

  it('abort by id ends the request with an error saying why and frees its blocks; an id not in flight is refused', async () => {
    const s = await startServing();
    const stream = s.stream({ promptTokens: tokenPrompt(30, 24), maxTokens: 3000 });
    expect((await stream.next()).done).toBe(false);
    expect(s.abort(stream.id, 'the client closed the connection')).toBe(true);
    await expect(stream.result).rejects.toThrow(/was aborted: the client closed the connection/);
    await untilIdle(s);
    expect(s.engine.metrics().leaks.gpuBlocks).toBe(0);
    expect(s.abort(stream.id, 'again')).toBe(false);
  });

  it('a signal aborted before the call queues nothing', async () => {
    const s = await startServing();
    expect(() => s.stream({ promptTokens: [1, 2, 3], maxTokens: 2 }, { signal: AbortSignal.abort() })).toThrow(RequestAbortedError);
    expect(s.engine.metrics().requests.added).toBe(0);
  });

  it('a full waiting queue refuses the next request with QueueFullError, and queues nothing', async () => {
    const s = await startServing({ maxWaiting: 2 });
    // Added in one turn of the event loop: none can have a token yet.
    const a = s.generate({ promptTokens: tokenPrompt(20, 7), maxTokens: 3 });
    const b = s.generate({ promptTokens: tokenPrompt(20, 8), maxTokens: 3 });
    let refused: unknown = null;
    try {
      s.stream({ promptTokens: tokenPrompt(20, 9), maxTokens: 3 });
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(QueueFullError);
    expect((refused as QueueFullError).code).toBe('ERR_KVTIER_QUEUE_FULL');
    await Promise.all([a, b]);
    expect(s.engine.metrics().requests.added).toBe(2);
  });

  it('a request the engine refuses throws its RequestError at once', async () => {
    const s = await startServing();
    expect(() => s.stream({ promptTokens: [], maxTokens: 2 })).toThrow(RequestError);
    expect(s.inFlight).toBe(0);
  });

  it('drain lets requests in flight finish and refuses new ones', async () => {
    const s = await startServing();
    const prompt = tokenPrompt(30, 10);
    const running = s.generate({ promptTokens: prompt, maxTokens: 20 });
    const drained = s.drain(600_000);
    expect(() => s.stream({ promptTokens: [1, 2], maxTokens: 2 })).toThrow(ServingClosedError);
    expect((await running).outputTokens).toEqual(referenceOutput(prompt, 20));
    expect(await drained).toEqual({ finished: 1, aborted: 0 });
  });

  it('drain aborts what is still running at its deadline, with an error naming it', async () => {
    const s = await startServing();
    const stream = s.stream({ promptTokens: tokenPrompt(30, 11), maxTokens: 3000 });
    await stream.next();
    expect(await s.drain(0)).toEqual({ finished: 0, aborted: 1 });
    await expect(stream.result).rejects.toThrow(/drain deadline 0 ms/);
    await untilIdle(s);
    expect(s.engine.metrics().leaks.gpuBlocks).toBe(0);
  });

  it('Symbol.asyncDispose aborts what is in flight and stops the ranks', async () => {
    const s = await startServing();
    const stream = s.stream({ promptTokens: tokenPrompt(30, 12), maxTokens: 3000 });
    await stream.next();
    await s[Symbol.asyncDispose]();
    await expect(stream.result).rejects.toBeInstanceOf(RequestAbortedError);
    expect(s.engine.liveRankThreads()).toBe(0);
    expect(() => s.stream({ promptTokens: [1], maxTokens: 1 })).toThrow(ServingClosedError);
  });
});
