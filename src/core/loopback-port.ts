import { createServer, Socket } from 'node:net';

/**
 * Loopback ports for servers this process starts itself (the remote tier's
 * bench, the tests' redis-server): a port free now, and waiting until a
 * started server accepts connections on it.
 */

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Whether something accepts a TCP connection on 127.0.0.1:`port` now. */
export function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.connect(port, '127.0.0.1');
  });
}

/**
 * Resolves once 127.0.0.1:`port` accepts connections; rejects, naming
 * `server`, when `timeoutMs` pass first, or as soon as `gaveUp` (e.g. the
 * server process failing to start) rejects.
 */
export async function waitForLoopbackPort(port: number, timeoutMs: number, server: string, gaveUp?: Promise<never>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = gaveUp === undefined ? await acceptsConnections(port) : await Promise.race([gaveUp, acceptsConnections(port)]);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${server} did not listen on port ${port} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
