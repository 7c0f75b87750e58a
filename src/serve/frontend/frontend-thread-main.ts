import type { MessagePort } from 'node:worker_threads';
import { kernelThreadId } from '../../core/thread-cpu.js';
import { CompletionServer } from '../http-server.js';
import { textCodecFor } from '../text-codec.js';
import { CrossThreadBackend } from './cross-thread-backend.js';
import type { FrontendMessage, FrontendThreadData } from './wire.js';

/**
 * The body of the HTTP front-end thread (entry: workers/frontend-thread.ts):
 * the same CompletionServer as on the engine's thread, over a
 * CrossThreadBackend. It says 'listening' (with its kernel thread id, so the
 * engine's side can read its CPU time) or 'listen-failed' with the error's
 * code; on 'close' it writes out its responses, closes the listener and
 * answers 'closed'.
 */
export async function runFrontendThread(port: MessagePort, data: FrontendThreadData): Promise<void> {
  const codec = await textCodecFor(data.vocabSize);
  let server: CompletionServer | null = null;
  const backend = new CrossThreadBackend(port, data.ring, data.arrivals, async () => {
    if (server === null) return;
    server.stopAccepting();
    await server.closeAfterResponses();
  });
  server = new CompletionServer({
    backend,
    model: { modelName: data.modelName, vocabSize: data.vocabSize, maxModelLen: data.maxModelLen },
    codec,
    streamInterval: data.streamInterval,
  });
  try {
    await server.listen(data.host, data.port);
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    port.postMessage({ type: 'listen-failed', code: e.code ?? null, message: e.message } satisfies FrontendMessage);
    return;
  }
  port.postMessage({ type: 'listening', url: server.url, port: server.port, threadId: kernelThreadId() } satisfies FrontendMessage);
}
