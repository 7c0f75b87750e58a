import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { kvtier, scratchFile } from '../cli-e2e/cli.js';
import { Subscriber } from 'zeromq';
import { decodeBatch } from '../events/vllm-subscriber.js';
import { referenceOutput, tokenIdsOf, tokenPrompt, until } from './helpers.js';

/**
 * `kvtier serve` as a user starts it: the built CLI in a child process on
 * port 0, its URL read from the line it prints, driven by the openai client,
 * and stopped with SIGTERM while streams are in flight.
 */

const REPO = resolve(import.meta.dirname, '../..');
const CLI = join(REPO, 'dist', 'src', 'cli', 'main.js');
const ENGINE_FLAGS = ['--backend', 'host', '--tp', '2', '--gpu-blocks', '256', '--cpu-blocks', '512', '--compute-ns-per-token', '0'];

interface ServeProcess {
  readonly url: string;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; stderr: string }>;
}

let running: ServeProcess | null = null;

afterEach(() => {
  if (running?.child.exitCode === null) running.child.kill('SIGKILL');
  running = null;
});

async function startServe(args: readonly string[]): Promise<ServeProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build kvtier first (npm run build:ts)`);
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', ...ENGINE_FLAGS, ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  const exited = new Promise<{ code: number | null; stderr: string }>((done) => child.on('close', (code) => done({ code, stderr })));
  const url = await new Promise<string>((found, fail) => {
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
      const match = /serving \S+ at (http:\/\/\S+)/.exec(stderr);
      if (match !== null) found(match[1]);
    });
    void exited.then(({ code }) => fail(new Error(`kvtier serve exited (${code}) before listening: ${stderr}`)));
  });
  running = { url, child, exited };
  return running;
}

type Outcome = { readonly ids: number[]; readonly finishReason: string | null } | { readonly error: string };

/** Streams one completion to its end, or to the error that ended it; `started` resolves with its first chunk. */
function streamCompletion(client: OpenAI, prompt: number[], maxTokens: number, started: () => void): Promise<Outcome> {
  return (async (): Promise<Outcome> => {
    const ids: number[] = [];
    let finishReason: string | null = null;
    try {
      const stream = await client.completions.create({ model: 'tiny', prompt, max_tokens: maxTokens, stream: true });
      let first = true;
      for await (const chunk of stream) {
        if (first) started();
        first = false;
        for (const choice of chunk.choices) {
          ids.push(...tokenIdsOf(choice));
          finishReason = choice.finish_reason ?? finishReason;
        }
      }
    } catch (error) {
      started();
      return { error: (error as Error).message };
    }
    return { ids, finishReason };
  })();
}

async function streamsUnderLoad(url: string, count: number, maxTokens: number): Promise<{ all: Promise<Outcome[]>; prompts: number[][]; allStarted: Promise<void> }> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'not-checked', maxRetries: 0 });
  const prompts = Array.from({ length: count }, (_, i) => tokenPrompt(30 + i, 100 + i));
  const starts: Promise<void>[] = [];
  const all = Promise.all(
    prompts.map((prompt) => {
      let started!: () => void;
      starts.push(new Promise<void>((r) => (started = r)));
      return streamCompletion(client, prompt, maxTokens, started);
    }),
  );
  return { all, prompts, allStarted: Promise.all(starts).then(() => undefined) };
}

describe('kvtier serve as a process', () => {
  it('SIGTERM during load lets every stream finish with the reference output, then exits 0', async () => {
    const serve = await startServe(['--verify']);
    const load = await streamsUnderLoad(serve.url, 12, 400);
    await load.allStarted;
    serve.child.kill('SIGTERM');
    const outcomes = await load.all;
    outcomes.forEach((outcome, i) => {
      expect(outcome).toEqual({ ids: referenceOutput(load.prompts[i], 400), finishReason: 'length' });
    });
    const exit = await serve.exited;
    expect(exit.code).toBe(0);
    expect(exit.stderr).toMatch(/SIGTERM: draining/);
    // Streams that ended before the signal arrived are not counted as in flight; none was aborted either way.
    expect(exit.stderr).toMatch(/\d+ finished and 0 were aborted at the drain deadline; verified 12, 0 differ/);
  });

  it('with --drain-timeout-ms 0, SIGTERM ends the streams in flight with an error naming the deadline, and exits 0', async () => {
    const serve = await startServe(['--drain-timeout-ms', '0']);
    const load = await streamsUnderLoad(serve.url, 6, 3000);
    await load.allStarted;
    serve.child.kill('SIGTERM');
    const outcomes = await load.all;
    for (const outcome of outcomes) expect(outcome).toEqual({ error: expect.stringMatching(/drain deadline 0 ms/) });
    const exit = await serve.exited;
    expect(exit.code).toBe(0);
    expect(exit.stderr).toMatch(/0 finished and 6 were aborted/);
  });

  it('a rank lost beyond recovery ends the streams in flight with an error and the process with exit code 1', async () => {
    const serve = await startServe(['--faults', 'crash:rank=1,step=200']);
    const load = await streamsUnderLoad(serve.url, 4, 3000);
    const outcomes = await load.all;
    // None can finish (3000 tokens each); a stream under way when the rank died names it.
    for (const outcome of outcomes) expect(outcome).toHaveProperty('error');
    expect(outcomes.filter((o) => 'error' in o && /rank 1 failed/.test(o.error)).length).toBeGreaterThan(0);
    const exit = await serve.exited;
    expect(exit.code).toBe(1);
    expect(exit.stderr).toMatch(/the engine stopped: engine stopped: rank 1 failed/);
  });

  it('refuses replay-only flags and a bad port before starting, naming the flag', async () => {
    const flag = await kvtier(['serve', '--requests', '5']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/unknown option '--requests'/);
    const config = scratchFile('serve.json', JSON.stringify({ gpuBlocks: 64, requests: 5 }));
    const replay = await kvtier(['serve', '--config', config]);
    expect(replay.code).toBe(2);
    expect(replay.stderr).toMatch(/key "requests" in .*serve\.json applies to `kvtier run` only/);
    const port = await kvtier(['serve', '--port', '70000']);
    expect(port.code).toBe(2);
    expect(port.stderr).toMatch(/--port.*70000.*expected a port number/);
    const thread = await kvtier(['serve', '--http-thread', 'maybe']);
    expect(thread.code).toBe(2);
    expect(thread.stderr).toMatch(/--http-thread.*maybe.*expected one of on, off/);
  });

  it("publishes the KV events of the completions it serves: a prompt's blocks are announced stored on the GPU, with its tokens", async () => {
    const sub = new Subscriber({ receiveHighWaterMark: 0, linger: 0 });
    await sub.bind('tcp://127.0.0.1:*');
    sub.subscribe('');
    const received: Uint8Array[] = [];
    const reading = (async () => {
      try {
        for await (const [, , payload] of sub) received.push(payload);
      } catch {
        // closed
      }
    })();
    const server = await startServe(['--kv-events-endpoint', sub.lastEndpoint as string, '--block-size', '16']);
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const storedRuns = (): number[][] =>
      received.flatMap((payload) => decodeBatch(payload).events.flatMap((e) => (e.kind === 'BlockStored' && e.medium === 'GPU' ? [e.tokenIds] : [])));
    // PUB drops what it sends before the subscription reaches it, so serve new prompts until one of theirs is heard.
    const sent: number[][] = [];
    let announced: { prompt: number[]; tokens: number[] } | null = null;
    while (announced === null) {
      if (sent.length < 200) {
        const prompt = tokenPrompt(48, 900 + sent.length);
        sent.push(prompt);
        await client.completions.create({ model: 'tiny', prompt, max_tokens: 2 });
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
      for (const tokens of storedRuns()) {
        const prompt = sent.find((p) => p.slice(0, 16).join() === tokens.slice(0, 16).join());
        if (prompt !== undefined) announced = { prompt, tokens };
      }
    }
    // The prompt's three full blocks were announced as one run carrying exactly its tokens.
    expect(announced.tokens.slice(0, 48)).toEqual(announced.prompt);
    server.child.kill('SIGTERM');
    const { code, stderr } = await server.exited;
    expect(code).toBe(0);
    expect(stderr).toMatch(/kvtier: published \d+ KV event batches at /);
    sub.close();
    await reading;
  });
});
