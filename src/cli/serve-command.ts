import { cudaDeviceCount } from '../device/native.js';
import { createLogger } from '../log/create-logger.js';
import { FrontendThreadError } from '../serve/errors.js';
import { startServer, type RunningServer } from '../serve/serve-app.js';
import { EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED } from './exit-codes.js';
import { checkHostMemory } from './memory-check.js';
import { resolveRunConfig, toEngineConfig } from './run-config.js';
import type { ServeConfig } from './serve-config.js';
import { UsageError } from './usage-error.js';
import { CommandKvEvents } from './run-kv-events.js';

export interface ServeCommandHooks {
  /** Where the status lines go (default stderr). */
  readonly write?: (line: string) => void;
  /** Called once the server listens (e.g. to watch it from the process that embeds the command). */
  readonly onListening?: (server: RunningServer) => void;
}

type StopSignal = keyof typeof EXIT_INTERRUPTED;

/**
 * `kvtier serve`: starts the engine and the HTTP server, says where it
 * listens on stderr (`kvtier: serving MODEL at http://HOST:PORT ...`), and
 * serves until SIGTERM or SIGINT. Then it drains: new completions get 503,
 * those in flight have --drain-timeout-ms to finish before they are aborted
 * (a stream then ends with an error event), and the process exits 0; 1 when
 * --verify found an output that differs from the reference model. A second
 * signal during the drain exits at once (143 / 130). If the engine stops
 * (a rank lost beyond recovery) or the HTTP front-end thread dies, the
 * server closes and the exit code is 1.
 */
export async function serveCommand(config: ServeConfig, hooks: ServeCommandHooks = {}): Promise<number> {
  const write = hooks.write ?? ((line: string) => process.stderr.write(line));
  const resolved = resolveRunConfig(config.run, cudaDeviceCount());
  checkHostMemory(resolved);
  // The publisher's sockets open first: a taken port fails before the engine starts.
  const publisher = await CommandKvEvents.start(resolved.kvEvents);
  const logger = createLogger({ level: resolved.monitoring.logLevel, format: resolved.monitoring.logFormat });
  let server: RunningServer;
  try {
    server = await startServer({
      engine: toEngineConfig(resolved, { offload: resolved.offload }),
      engineOptions: { logger, slowStepMs: resolved.monitoring.slowStepMs },
      host: config.host,
      port: config.port,
      modelName: config.servedModelName ?? undefined,
      maxWaiting: config.maxWaiting,
      streamInterval: config.streamInterval,
      verify: config.verify,
      httpThread: config.httpThread,
      onMismatch: (m) => logger.error({ request: m.id, index: m.index, expected: m.expected, actual: m.actual }, 'output differs from the reference model'),
    });
  } catch (error) {
    await publisher.close();
    throw listenError(error, config);
  }
  publisher.attach(server.serving.engine);
  write(`kvtier: serving ${server.modelName} at ${server.url} (POST /v1/completions, GET /v1/models, /health, /metrics)\n`);
  hooks.onListening?.(server);
  const stopSignal = nextStopSignal();
  const stop = await Promise.race([stopSignal.signal, server.failed.then((error) => ({ error }))]);
  stopSignal.cancel();
  if (typeof stop !== 'string' && stop.error instanceof FrontendThreadError) {
    // No thread is left to answer clients: the requests in flight are aborted and the process ends for a supervisor to restart it.
    write(`kvtier: ${stop.error.message}\n`);
    await server.close();
    await publisher.close();
    return EXIT_RUN_FAILED;
  }
  if (typeof stop !== 'string') {
    // The engine stopped (a rank was lost beyond recovery): nothing left to serve, so the process ends for a supervisor to restart it.
    write(`kvtier: the engine stopped: ${(stop.error as Error).message ?? String(stop.error)}\n`);
    // Every request already ended with the engine's error; drain lets their responses be written out before closing.
    await server.drain(0);
    await publisher.close();
    return EXIT_RUN_FAILED;
  }
  const signal = stop;
  write(`kvtier: ${signal}: draining; requests in flight have ${config.drainTimeoutMs} ms to finish\n`);
  const forceExit = (): void => process.exit(EXIT_INTERRUPTED[signal]);
  process.once('SIGTERM', forceExit);
  process.once('SIGINT', forceExit);
  try {
    const outcome = await server.drain(config.drainTimeoutMs);
    await publisher.close();
    const verify = outcome.verify;
    const verifyText = verify === null ? '' : `; verified ${verify.checked}, ${verify.mismatches} differ from the reference model`;
    write(`kvtier: stopped; of the requests in flight at ${signal}, ${outcome.finished} finished and ${outcome.aborted} were aborted at the drain deadline${verifyText}\n`);
    return verify !== null && verify.mismatches > 0 ? EXIT_RUN_FAILED : EXIT_OK;
  } finally {
    process.off('SIGTERM', forceExit);
    process.off('SIGINT', forceExit);
  }
}

/** The next SIGTERM or SIGINT; cancel() stops listening (when serving ended otherwise). */
function nextStopSignal(): { readonly signal: Promise<StopSignal>; cancel(): void } {
  let cancel = (): void => {};
  const signal = new Promise<StopSignal>((resolve) => {
    const on = (stop: StopSignal) => (): void => {
      cancel();
      resolve(stop);
    };
    const onTerm = on('SIGTERM');
    const onInt = on('SIGINT');
    cancel = () => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
    };
    process.once('SIGTERM', onTerm);
    process.once('SIGINT', onInt);
  });
  return { signal, cancel };
}

/** A port in use or an address that cannot be listened on is bad input naming the flag. */
function listenError(error: unknown, config: ServeConfig): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return new UsageError(`--port ${config.port}: ${config.host}:${config.port} is already in use`);
  if (code === 'EACCES') return new UsageError(`--port ${config.port}: not allowed to listen on ${config.host}:${config.port}`);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new UsageError(`--host ${config.host}: cannot listen on this address (${code})`);
  return error;
}
