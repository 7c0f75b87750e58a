import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { UsageError } from './usage-error.js';

/**
 * The HTTP endpoint of `kvtier run --metrics-port`: GET /metrics answers the
 * current registry in the Prometheus text format. It listens before the run
 * starts (so a taken port fails the command at once), and a new registry can
 * be put behind it (--compare runs two engines). Until one is, /metrics
 * answers 503.
 */
export class MetricsServer {
  private registry: Registry | null = null;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /**
   * Listens on host:port (port 0: any free port). A port in use or an
   * address that cannot be listened on is a UsageError naming the flag.
   */
  static async listen(host: string, port: number): Promise<MetricsServer> {
    let instance: MetricsServer | null = null;
    const server = createServer((request, response) => {
      if (instance === null) {
        response.writeHead(503).end();
        return;
      }
      instance.handle(request, response);
    });
    await new Promise<void>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => reject(listenError(error, host, port));
      server.once('error', onError);
      server.listen(port, host, () => {
        server.off('error', onError);
        resolve();
      });
    });
    // A scrape in progress must not keep the process alive once the run ended.
    server.unref();
    const address = server.address() as AddressInfo;
    const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    instance = new MetricsServer(server, `http://${shownHost}:${address.port}/metrics`);
    return instance;
  }

  /** Serves `registry` from now on. */
  serve(registry: Registry): void {
    this.registry = registry;
  }

  /** Stops listening and ends open connections. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const path = (request.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      response.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('not found: try /metrics\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    const registry = this.registry;
    if (registry === null) {
      response.writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' }).end('the engine is starting\n');
      return;
    }
    registry.metrics().then(
      (text) => {
        response.writeHead(200, { 'Content-Type': registry.contentType });
        response.end(request.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => {
        response.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
        response.end(`metrics collection failed: ${error instanceof Error ? error.message : String(error)}\n`);
      },
    );
  }
}

function listenError(error: NodeJS.ErrnoException, host: string, port: number): Error {
  if (error.code === 'EADDRINUSE') return new UsageError(`--metrics-port ${port}: ${host}:${port} is already in use`);
  if (error.code === 'EACCES') return new UsageError(`--metrics-port ${port}: not allowed to listen on ${host}:${port}`);
  if (error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND' || error.code === 'EAI_AGAIN') {
    return new UsageError(`--metrics-host ${host}: cannot listen on this address (${error.code})`);
  }
  return new UsageError(`--metrics-port ${port}: cannot listen on ${host}:${port}: ${error.message}`);
}
