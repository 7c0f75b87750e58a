import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { packageRoot } from '../core/package-root.js';
import { chunkEvent, chunkPrefix } from '../serve/completion-response.js';
import { threadCpuUsAfterSleep } from './serve-thread-cpu.js';

/**
 * The floor under a streamed completion's cost on this machine: a bare
 * `socket.write` of one event-sized chunk to each of `connections` loopback
 * TCP connections (Nagle off, as the server's), one round per engine step,
 * read by another process. The engine is idle meanwhile, so the main
 * thread's CPU time over the rounds is the writes' (the kernel's loopback
 * send and the wake-up of the reader included) and the rounds' timers.
 * Rounds are spaced by a short sleep, as steps are, so the reader drains
 * each round and the kernel cannot coalesce a socket's writes.
 */

export interface SocketFloor {
  /** CPU microseconds per round (one write to every connection). */
  readonly usPerRound: number;
  readonly usPerWrite: number;
  /** Bytes of each write: a chunk-framed server-sent event of one token. */
  readonly writeBytes: number;
}

const ROUND_GAP_MS = 2;

export async function measureSocketFloor(connections: number, rounds: number): Promise<SocketFloor> {
  const frame = sampleFrame();
  const sockets: Socket[] = [];
  let allConnected!: () => void;
  const connected = new Promise<void>((resolve) => (allConnected = resolve));
  const server = createServer({ noDelay: true }, (socket) => {
    sockets.push(socket);
    if (sockets.length === connections) allConnected();
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as { port: number }).port;
  const reader = spawnReader(port, connections);
  try {
    await Promise.race([connected, reader.then(() => Promise.reject(new Error('the socket floor reader exited before it connected')))]);
    let processUs = 0;
    const threadBefore = await threadCpuUsAfterSleep();
    for (let round = 0; round < rounds; round++) {
      await new Promise((resolve) => setTimeout(resolve, ROUND_GAP_MS));
      const before = process.cpuUsage();
      for (const socket of sockets) socket.write(frame);
      const used = process.cpuUsage(before);
      processUs += used.user + used.system;
    }
    const threadAfter = await threadCpuUsAfterSleep();
    // As the serve rows: the main thread's CPU (the sleeps' timers too) where it can be read, else the process's over the writes.
    const cpuUs = threadBefore === null || threadAfter === null ? processUs : threadAfter - threadBefore;
    for (const socket of sockets) socket.end();
    const bytes = await reader;
    if (bytes !== rounds * connections * Buffer.byteLength(frame)) throw new Error(`the socket floor reader got ${bytes} bytes, expected ${rounds * connections * Buffer.byteLength(frame)}`);
    return { usPerRound: cpuUs / rounds, usPerWrite: cpuUs / rounds / connections, writeBytes: Buffer.byteLength(frame) };
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** One token's server-sent event as SseWriter puts it on the socket: chunk size, event, CRLF. */
function sampleFrame(): string {
  const prefix = chunkPrefix({ id: `cmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: 'tiny' });
  const event = chunkEvent(prefix, ' token', [12345], null, false);
  return `${Buffer.byteLength(event).toString(16)}\r\n${event}\r\n`;
}

/** The reader child (dist/src/bench/serve-sink-main.js); resolves with the bytes it read. */
function spawnReader(port: number, connections: number): Promise<number> {
  const entry = join(packageRoot(), 'dist', 'src', 'bench', 'serve-sink-main.js');
  if (!existsSync(entry)) return Promise.reject(new Error(`${entry} is missing: build kvtier first (npm run build:ts)`));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, String(port), String(connections)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`the socket floor reader failed (exit ${code}): ${stderr.trim()}`));
      else resolve(Number(stdout.trim()));
    });
  });
}
