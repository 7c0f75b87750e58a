import { createMetricsRegistry } from '../prometheus/metrics-registry.js';
import type { EngineOptions } from '../runtime/engine.js';
import type { EngineConfigInput } from '../runtime/engine-types.js';
import type { IntegrityMismatch } from '../report/integrity-check.js';
import { FrontendHost } from './frontend/frontend-host.js';
import type { HttpFrontEnd } from './http-front-end.js';
import { CompletionServer } from './http-server.js';
import { InProcessBackend } from './in-process-backend.js';
import { InProcessFrontEnd } from './in-process-front-end.js';
import { registerServingMetrics } from './serve-metrics.js';
import { ServingEngine, type DrainOutcome } from './serving-engine.js';
import { textCodecFor } from './text-codec.js';
import { LiveVerifier, type VerifyCounts } from './verifier.js';

/**
 * One serving process as a library call: an engine, its serving loop, the
 * HTTP server in front, and with `verify` the live integrity check. The CLI
 * (`kvtier serve`) and the tests start it the same way.
 *
 * By default the HTTP server runs on a front-end thread of its own
 * (frontend/): the engine's step at 256 running requests is some 50 µs of
 * CPU on the main thread, and one socket write some 5 µs, so a token per
 * stream per step written from the main thread would cost many times the
 * scheduler. `httpThread: false` keeps it on the main thread.
 */

export interface ServeOptions {
  readonly engine: EngineConfigInput;
  readonly engineOptions?: EngineOptions;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 8000; 0: any free port. */
  readonly port?: number;
  /** The model name of the API; default: the model's own name (e.g. "tiny"). */
  readonly modelName?: string;
  /** The waiting-queue bound (ServingOptions.maxWaiting). */
  readonly maxWaiting?: number;
  /** Tokens per server-sent event of a streamed completion (default 1: each token as it comes). */
  readonly streamInterval?: number;
  /** Check every finished request against the reference model (counted in /metrics). */
  readonly verify?: boolean;
  readonly onMismatch?: (mismatch: IntegrityMismatch) => void;
  /**
   * Run the HTTP server on a front-end thread (default true), fed through a
   * shared token ring; false: on the engine's (main) thread.
   */
  readonly httpThread?: boolean;
  /** The front-end thread's token ring, in Int32 words (a power of two); default: sized from maxNumSeqs (token-ring.ts). */
  readonly ringWords?: number;
}

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly modelName: string;
  readonly serving: ServingEngine;
  readonly http: HttpFrontEnd;
  /** Settles with the error that stopped serving: the engine's (a rank lost beyond recovery) or the front-end thread's death. */
  readonly failed: Promise<unknown>;
  /** The integrity counts so far; null without verify. */
  verifyCounts(): VerifyCounts | null;
  /** Graceful stop: 503 to new completions, in-flight ones finish within `deadlineMs` or are aborted; then everything closes. */
  drain(deadlineMs: number): Promise<DrainOutcome & { readonly verify: VerifyCounts | null }>;
  /** Immediate stop: aborts what is in flight and closes everything. */
  close(): Promise<void>;
}

export const DEFAULT_SERVE_HOST = '127.0.0.1';
export const DEFAULT_SERVE_PORT = 8000;

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  let verifier: LiveVerifier | null = null;
  const serving = await ServingEngine.create(options.engine, options.engineOptions ?? {}, {
    maxWaiting: options.maxWaiting,
    onStep: (report) => {
      if (verifier !== null) for (const finished of report.finished) verifier.add(finished);
    },
  });
  let http: HttpFrontEnd;
  try {
    const config = serving.engine.config;
    verifier = options.verify === true ? new LiveVerifier(config.model, options.onMismatch) : null;
    const model = { modelName: options.modelName ?? config.model.name, vocabSize: config.model.vocabSize, maxModelLen: config.maxModelLen };
    const registry = createMetricsRegistry(serving.engine);
    const v = verifier;
    registerServingMetrics(registry, { inFlight: () => serving.inFlight, waiting: () => serving.waiting, verify: () => v?.counts() ?? null });
    const host = options.host ?? DEFAULT_SERVE_HOST;
    const port = options.port ?? DEFAULT_SERVE_PORT;
    const streamInterval = options.streamInterval ?? 1;
    if (options.httpThread ?? true) {
      http = await FrontendHost.start({ serving, metricsText: () => registry.metrics(), model, host, port, streamInterval, ringWords: options.ringWords });
    } else {
      const server = new CompletionServer({ backend: new InProcessBackend(serving, registry), model, codec: await textCodecFor(model.vocabSize), streamInterval });
      await server.listen(host, port);
      http = new InProcessFrontEnd(server, serving);
    }
  } catch (error) {
    await serving.close();
    await verifier?.close();
    throw error;
  }
  const modelName = options.modelName ?? serving.engine.config.model.name;
  let closing: Promise<void> | null = null;
  const closeAll = async (): Promise<void> => {
    await http.close();
    await serving.close();
    await verifier?.close();
  };
  return {
    url: http.url,
    port: http.port,
    modelName,
    serving,
    http,
    failed: Promise.race([serving.failed, http.failed]),
    verifyCounts: () => verifier?.counts() ?? null,
    async drain(deadlineMs) {
      const outcome = await http.drain(deadlineMs);
      closing ??= closeAll();
      await closing;
      return { ...outcome, verify: verifier?.counts() ?? null };
    },
    close() {
      closing ??= closeAll();
      return closing;
    },
  };
}
