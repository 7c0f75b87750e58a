import { createMetricsRegistry } from '../prometheus/metrics-registry.js';
import type { EngineOptions } from '../runtime/engine.js';
import type { EngineConfigInput } from '../runtime/engine-types.js';
import type { IntegrityMismatch } from '../report/integrity-check.js';
import { CompletionServer } from './http-server.js';
import { ServingEngine, type DrainOutcome } from './serving-engine.js';
import { textCodecFor } from './text-codec.js';
import { LiveVerifier, type VerifyCounts } from './verifier.js';

/**
 * One serving process as a library call: an engine, its serving loop, the
 * HTTP server in front, and with `verify` the live integrity check. The CLI
 * (`kvtier serve`) and the tests start it the same way.
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
}

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly modelName: string;
  readonly serving: ServingEngine;
  readonly http: CompletionServer;
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
  let http: CompletionServer;
  try {
    const model = serving.engine.config.model;
    verifier = options.verify === true ? new LiveVerifier(model, options.onMismatch) : null;
    const modelName = options.modelName ?? model.name;
    http = new CompletionServer({ serving, modelName, codec: await textCodecFor(model.vocabSize), registry: createMetricsRegistry(serving.engine), verifier, streamInterval: options.streamInterval });
    await http.listen(options.host ?? DEFAULT_SERVE_HOST, options.port ?? DEFAULT_SERVE_PORT);
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
