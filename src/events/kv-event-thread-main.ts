import { setTimeout as sleep } from 'node:timers/promises';
import type { MessagePort } from 'node:worker_threads';
import { kernelThreadId } from '../core/thread-cpu.js';
import type { KvRecordBatch } from './kv-event-records.js';
import { KvEventPublisher } from './kv-event-publisher.js';
import { KvEventRingReader } from './kv-event-ring.js';
import type { KvEventHostMessage, KvEventThreadData, KvEventThreadMessage } from './kv-event-thread-wire.js';

/**
 * The body of the KV event thread (entry: workers/kv-event-thread.ts): opens
 * the ZeroMQ sockets, then reads the engine's records from the ring as they
 * are published, encodes each step's batch and publishes it (with the replay
 * buffer). Woken by a publish, it reads everything there, then reads again
 * every batchWindowMs for as long as each window brought something: while
 * steps come, one wake-up handles a window's steps and nothing wakes it. It says 'ready' (with its kernel thread id, so the engine's side
 * can read its CPU time) or 'start-failed'; on 'close' it reads what is
 * left, sends what is queued, closes the sockets and answers 'closed'.
 */
export async function runKvEventThread(port: MessagePort, data: KvEventThreadData): Promise<void> {
  let publisher: KvEventPublisher;
  try {
    publisher = await KvEventPublisher.start(data.publisher);
  } catch (error) {
    post(port, { type: 'start-failed', message: (error as Error).message });
    return;
  }
  const reader = new KvEventRingReader(data.ring, () => post(port, { type: 'room' }));
  const onBatch = (batch: KvRecordBatch): void => publisher.publishRecords(batch);
  let closing = false;
  port.on('message', (message: KvEventHostMessage) => {
    if (message.type !== 'close' || closing) return;
    closing = true;
    // Everything the engine's side wrote was published before it asked to close.
    reader.drain(onBatch);
    void publisher.close().then(() => post(port, { type: 'closed', published: publisher.published, failure: publisher.failure?.message ?? null }));
  });
  post(port, { type: 'ready', endpoint: publisher.endpoint, replayEndpoint: publisher.replayEndpoint, threadId: kernelThreadId() });
  const windowMs = data.batchWindowMs;
  while (!closing) {
    await reader.published();
    if (closing) break;
    reader.drain(onBatch);
    while (windowMs > 0) {
      await sleep(windowMs);
      // A window that brought nothing: the engine is idle (or slower than the window), sleep on the ring.
      if (closing || reader.drain(onBatch) === 0) break;
    }
  }
}

function post(port: MessagePort, message: KvEventThreadMessage): void {
  port.postMessage(message);
}
