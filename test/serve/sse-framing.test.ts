import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/serve/serve-app.js';
import { utf8Length } from '../../src/serve/sse-writer.js';
import { referenceOutput, startTestServer, tokenPrompt } from './helpers.js';

let server: RunningServer | null = null;

afterEach(async () => {
  await server?.close();
  server = null;
});

/** Sends a raw HTTP request and returns every byte of the answer once the server closes the connection. */
async function rawExchange(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let received = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
  });
}

function streamRequest(version: '1.0' | '1.1', prompt: readonly number[], maxTokens: number): string {
  const body = JSON.stringify({ model: 'tiny', prompt, max_tokens: maxTokens, stream: true });
  return `POST /v1/completions HTTP/${version}\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** The body of a chunked response, its framing checked: every chunk's size line matches its bytes. */
function unchunk(body: string): string {
  const bytes = Buffer.from(body, 'utf8');
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', at);
    expect(lineEnd).toBeGreaterThan(at);
    const size = Number.parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
    if (size === 0) return Buffer.concat(parts).toString('utf8');
    parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    expect(bytes.subarray(lineEnd + 2 + size, lineEnd + 4 + size).toString('latin1')).toBe('\r\n');
    at = lineEnd + 4 + size;
  }
}

/** Token ids of the `data:` events of a server-sent event stream, and whether it ended with [DONE]. */
function eventTokens(events: string): { tokens: number[]; done: boolean } {
  const data = events.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  const done = data.at(-1) === '[DONE]';
  const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as { choices: { token_ids: number[] }[] });
  return { tokens: chunks.flatMap((c) => c.choices.flatMap((choice) => choice.token_ids)), done };
}

describe('server-sent event framing on the wire', () => {
  it('over HTTP/1.1 every event is a well-formed chunk, and the events carry the reference tokens', async () => {
    server = await startTestServer();
    const prompt = tokenPrompt(30, 31);
    const answer = await rawExchange(server.url, streamRequest('1.1', prompt, 12));
    const split = answer.indexOf('\r\n\r\n');
    const head = answer.slice(0, split);
    const body = answer.slice(split + 4);
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head.toLowerCase()).toContain('transfer-encoding: chunked');
    expect(eventTokens(unchunk(body))).toEqual({ tokens: referenceOutput(prompt, 12), done: true });
  });

  it('over HTTP/1.0 (no chunked encoding) the events are sent as they are, and the stream ends with the connection', async () => {
    server = await startTestServer();
    const prompt = tokenPrompt(30, 32);
    const answer = await rawExchange(server.url, streamRequest('1.0', prompt, 12));
    const split = answer.indexOf('\r\n\r\n');
    const head = answer.slice(0, split);
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head.toLowerCase()).not.toContain('transfer-encoding');
    expect(eventTokens(answer.slice(split + 4))).toEqual({ tokens: referenceOutput(prompt, 12), done: true });
  });

  it('an event\'s byte count, for its chunk size, is its UTF-8 length: ASCII, two- and three-byte characters, surrogate pairs', () => {
    for (const text of ['', 'plain', 'café', '日本語', '🙂 emoji 🙂', JSON.stringify('mixed «ü» 語 🙂\n\u0000'), JSON.stringify('\ud800 lone')]) {
      expect(utf8Length(text)).toBe(Buffer.byteLength(text));
    }
  });
});
