import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { RequestError } from '../core/errors.js';
import { EngineStoppedError } from '../runtime/engine.js';
import type { CompletionBackend, CompletionOutcome, CompletionStream } from './completion-backend.js';
import { parseCompletionRequest, type CompletionLimits, type CompletionParams } from './completion-request.js';
import { completionBody, DONE_EVENT, type CompletionHeader } from './completion-response.js';
import { QueueFullError, RequestAbortedError, ServingClosedError } from './errors.js';
import { HttpError, type OpenAiErrorBody } from './openai-errors.js';
import { ServeCounters, registerResponseMetrics } from './serve-metrics.js';
import { SseWriter } from './sse-writer.js';
import { IncrementalDecoder, type TextCodec } from './text-codec.js';

/**
 * `kvtier serve`'s HTTP API, on Node's http module:
 *
 * - `POST /v1/completions`: OpenAI's completions (completion-request.ts,
 *   completion-response.ts), whole or as server-sent events;
 * - `GET /v1/models`: the one model served;
 * - `GET /health`: 200 while serving, 503 once draining or stopped;
 * - `GET /metrics`: the engine's Prometheus text plus `kvtier_serve_*`.
 *
 * It reaches the engine through a CompletionBackend only, so the same
 * server runs on the engine's thread or on a front-end thread of its own.
 * A client that goes away before its completion ends aborts it (its blocks
 * are freed at the next step boundary). stopAccepting() answers new
 * completions 503; closeAfterResponses() waits for the responses in flight
 * (the backend ends their completions) and closes the listener.
 */

/** The model as the API shows it. */
export interface ServedModel {
  /** The model name clients send and /v1/models lists. */
  readonly modelName: string;
  readonly vocabSize: number;
  readonly maxModelLen: number;
}

export interface CompletionServerOptions {
  readonly backend: CompletionBackend;
  readonly model: ServedModel;
  /** The tokenizer of text prompts and completions; null: token ids only. */
  readonly codec: TextCodec | null;
  /**
   * Tokens per server-sent event (the last event may carry fewer): 1 sends
   * every token as it is generated; more trade that latency for fewer
   * socket writes, the bulk of a stream's cost. Default 1.
   */
  readonly streamInterval?: number;
}

/** Largest request body read (a prompt of a million token ids fits). */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

export class CompletionServer {
  readonly counters = new ServeCounters();
  /** The server's own counters (`kvtier_serve_responses_total`...), joined to the backend's text on /metrics. */
  readonly registry = new Registry();
  private readonly limits: CompletionLimits;
  private readonly responses = new Set<Promise<void>>();
  private draining = false;
  private server: Server | null = null;
  private address: AddressInfo | null = null;

  constructor(private readonly options: CompletionServerOptions) {
    const model = options.model;
    this.limits = { modelName: model.modelName, vocabSize: model.vocabSize, maxModelLen: model.maxModelLen, codec: options.codec };
    registerResponseMetrics(this.registry, this.counters);
  }

  /** Listens on host:port (0: any free port); resolves once bound. Errors (EADDRINUSE...) reject. */
  async listen(host: string, port: number): Promise<void> {
    const server = createServer((request, response) => this.handle(request, response));
    // Streams last as long as their completions: no request timeout.
    server.requestTimeout = 0;
    server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.address = server.address() as AddressInfo;
  }

  /** http://host:port of the listener. */
  get url(): string {
    if (this.address === null) throw new Error('the server is not listening');
    const host = this.address.family === 'IPv6' ? `[${this.address.address}]` : this.address.address;
    return `http://${host}:${this.address.port}`;
  }

  get port(): number {
    return this.address?.port ?? 0;
  }

  /** From now on new completions get 503 and /health answers 503. */
  stopAccepting(): void {
    this.draining = true;
  }

  /** Waits for the responses in flight to be written out (their completions end through the backend), then closes the listener. */
  async closeAfterResponses(): Promise<void> {
    await Promise.allSettled([...this.responses]);
    await this.close();
  }

  /** Closes the listener and every connection at once. */
  async close(): Promise<void> {
    const server = this.server;
    if (server === null) return;
    this.server = null;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    if (this.draining) response.setHeader('Connection', 'close');
    const path = (request.url ?? '/').split('?')[0];
    const route = ROUTES[path];
    if (route === undefined) {
      sendError(response, new HttpError(404, 'not_found_error', `no route ${path}: try POST /v1/completions, GET /v1/models, /health or /metrics`, null, 'not_found'));
      return;
    }
    if (request.method !== route.method && !(route.method === 'GET' && request.method === 'HEAD')) {
      response.setHeader('Allow', route.method);
      sendError(response, new HttpError(405, 'invalid_request_error', `${path} takes ${route.method}, not ${request.method ?? '?'}`, null, 'method_not_allowed'));
      return;
    }
    if (path === '/v1/completions') response.once('finish', () => this.counters.response(response.statusCode));
    const done = route.handler(this, request, response).catch((error: unknown) => {
      if (!response.headersSent) sendError(response, asHttpError(error));
      else response.end();
    });
    this.responses.add(done);
    void done.finally(() => this.responses.delete(done));
  }

  async health(_request: IncomingMessage, response: ServerResponse): Promise<void> {
    const state = this.draining || !this.options.backend.accepting ? 'draining' : 'ok';
    sendJson(response, state === 'ok' ? 200 : 503, { status: state });
  }

  async models(_request: IncomingMessage, response: ServerResponse): Promise<void> {
    const model = this.options.model;
    sendJson(response, 200, {
      object: 'list',
      data: [
        {
          id: model.modelName,
          object: 'model',
          created: 0,
          owned_by: 'kvtier',
          max_model_len: model.maxModelLen,
          vocab_size: model.vocabSize,
          tokenizer: this.options.codec?.name ?? null,
        },
      ],
    });
  }

  async metrics(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const text = (await this.options.backend.metricsText()) + (await this.registry.metrics());
    response.writeHead(200, { 'Content-Type': this.registry.contentType });
    response.end(request.method === 'HEAD' ? undefined : text);
  }

  async completions(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (this.draining) throw new ServingClosedError('draining');
    const params = parseCompletionRequest(await readJsonBody(request), this.limits);
    const controller = new AbortController();
    const stream = await this.options.backend.submit(
      { promptTokens: params.promptTokens, maxTokens: params.maxTokens, seed: params.seed, cacheSalt: params.cacheSalt },
      controller.signal,
    );
    // 'close' also follows a completed response: only one cut short aborts its request.
    const clientGone = (): void => {
      if (stream.done || controller.signal.aborted) return;
      this.counters.streamsAborted++;
      controller.abort(new Error('the client closed the connection'));
    };
    response.once('close', clientGone);
    // A client that left while its body was read has closed already.
    if (response.destroyed || request.socket.destroyed) clientGone();
    const header: CompletionHeader = { id: `cmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: params.model };
    if (params.stream) await this.streamCompletion(params, header, stream, response);
    else await this.wholeCompletion(header, stream, response);
  }

  private async wholeCompletion(header: CompletionHeader, stream: CompletionStream, response: ServerResponse): Promise<void> {
    const finished = await stream.result;
    if (finished.finishReason === 'error') throw requestFailed(finished);
    const text = this.options.codec === null ? '' : this.options.codec.decode(finished.outputTokens);
    sendJson(response, 200, completionBody(header, finished, text));
  }

  private async streamCompletion(params: CompletionParams, header: CompletionHeader, stream: CompletionStream, response: ServerResponse): Promise<void> {
    response.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' });
    // The header goes out now: the writer may then put events on the socket itself.
    response.flushHeaders();
    const decoder = this.options.codec === null ? null : new IncrementalDecoder(this.options.codec);
    const writer = new SseWriter(response, header, decoder, this.options.streamInterval ?? 1, params.includeUsage);
    // Tokens reach the writer synchronously as the backend delivers them (the serving loop, or the token ring's reader): no promise per token.
    stream.attach(writer);
    let finished: CompletionOutcome;
    try {
      finished = await stream.result;
      if (finished.finishReason === 'error') throw requestFailed(finished);
    } catch (error) {
      if (!response.destroyed) response.end(`data: ${JSON.stringify(asHttpError(error).body())}\n\n${DONE_EVENT}`);
      return;
    }
    if (response.destroyed) return;
    response.end(writer.tail(finished, params.includeUsage));
  }
}

type RouteHandler = (server: CompletionServer, request: IncomingMessage, response: ServerResponse) => Promise<void>;

const ROUTES: Readonly<Record<string, { readonly method: 'GET' | 'POST'; readonly handler: RouteHandler }>> = {
  '/v1/completions': { method: 'POST', handler: (s, q, r) => s.completions(q, r) },
  '/v1/models': { method: 'GET', handler: (s, q, r) => s.models(q, r) },
  '/health': { method: 'GET', handler: (s, q, r) => s.health(q, r) },
  '/metrics': { method: 'GET', handler: (s, q, r) => s.metrics(q, r) },
};

export function requestFailed(finished: Pick<CompletionOutcome, 'errorMessage'>): HttpError {
  return new HttpError(500, 'server_error', `the request failed: ${finished.errorMessage ?? 'unknown error'}`, null, 'request_failed');
}

/** The OpenAI-style error for anything a handler throws. */
export function asHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof QueueFullError) return new HttpError(429, 'rate_limit_error', error.message, null, error.code);
  if (error instanceof ServingClosedError) return new HttpError(503, 'service_unavailable_error', error.message, null, error.code);
  if (error instanceof RequestAbortedError) return new HttpError(503, 'service_unavailable_error', error.message, null, error.code);
  if (error instanceof RequestError) return new HttpError(400, 'invalid_request_error', error.message, null, error.code);
  if (error instanceof EngineStoppedError) return new HttpError(503, 'service_unavailable_error', error.message, null, error.code);
  const message = error instanceof Error ? error.message : String(error);
  return new HttpError(500, 'server_error', `internal error: ${message}`, null, 'internal_error');
}

function sendJson(response: ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  response.end(text);
}

function sendError(response: ServerResponse, error: HttpError): void {
  const body: OpenAiErrorBody = error.body();
  sendJson(response, error.status, body);
}

async function readJsonBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, 'invalid_request_error', `the request body is over ${MAX_BODY_BYTES} bytes`, null, 'body_too_large');
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (error) {
    throw new HttpError(400, 'invalid_request_error', `the request body is not valid JSON: ${(error as Error).message}`, null, 'invalid_json');
  }
}
