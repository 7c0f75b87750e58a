import { parentPort, workerData } from 'node:worker_threads';
import { runFrontendThread } from '../src/serve/frontend/frontend-thread-main.js';
import type { FrontendThreadData } from '../src/serve/frontend/wire.js';

/**
 * The thread entry point of `kvtier serve`'s HTTP front end
 * (src/serve/frontend/frontend-thread-main.ts). An error it cannot handle
 * is left uncaught: the thread dies and the engine's side reports it.
 */
if (!parentPort) throw new Error('frontend-thread must run in a worker thread');
void runFrontendThread(parentPort, workerData as FrontendThreadData).catch((error: unknown) => {
  setImmediate(() => {
    throw error;
  });
});
