import { parentPort, workerData } from 'node:worker_threads';
import { runKvEventThread } from '../src/events/kv-event-thread-main.js';
import type { KvEventThreadData } from '../src/events/kv-event-thread-wire.js';

/**
 * The thread entry point of the KV event thread (src/events/kv-event-thread-main.ts).
 * An error it cannot handle is left uncaught: the thread dies and the engine's side reports it.
 */
if (!parentPort) throw new Error('kv-event-thread must run in a worker thread');
void runKvEventThread(parentPort, workerData as KvEventThreadData).catch((error: unknown) => {
  setImmediate(() => {
    throw error;
  });
});
