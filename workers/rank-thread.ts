import * as Comlink from 'comlink';
import { parentPort } from 'node:worker_threads';
import { openDevice } from '../src/device/device.js';
import type { RankDeath } from '../src/faults/rank-faults.js';
import { threadEndpoint } from '../src/runtime/comlink-endpoint.js';
import { RankWorker } from '../src/rank/rank-worker.js';

/**
 * The thread entry point of one tensor-parallel rank: a RankWorker
 * (src/rank/rank-worker.ts) that opens the native addon, exposed to the
 * executor over Comlink.
 */

/** Exit code of a rank thread that an injected crash ended. */
const INJECTED_EXIT_CODE = 70;

/**
 * Carries out an injected death: a hang never answers (the
 * executor's deadline must catch it), a crash either exits the thread or
 * throws an uncaught error in it. The thread's device is released when the
 * thread ends, as it would be for a real crash.
 */
function die(death: RankDeath, when: string): Promise<never> {
  if (death.kind === 'crash') {
    if (death.how === 'exit') process.exit(INJECTED_EXIT_CODE);
    // Thrown outside the RPC handler, so it is an uncaught error of the thread.
    setImmediate(() => {
      throw new Error(`injected crash ${when}`);
    });
  }
  return new Promise<never>(() => {});
}

if (!parentPort) throw new Error('rank-thread must run in a worker thread');
Comlink.expose(new RankWorker({ openDevice, die }), threadEndpoint(parentPort));
