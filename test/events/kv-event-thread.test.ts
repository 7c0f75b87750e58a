import { afterEach, describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../src/events/kv-cache-events.js';
import { KvEventThread } from '../../src/events/kv-event-thread.js';
import { eventBlockHash, KvEventWireEncoder, type KvEventEncoding } from '../../src/events/vllm-wire.js';
import type { Engine } from '../../src/runtime/engine.js';
import type { RequestSpec } from '../../src/runtime/engine-types.js';
import { probe } from '../../src/testing/index.js';
import { expectAllMatchReference, FAST, runWaves, sharedPrefixRequests, tokens, withEngine } from '../e2e/helpers.js';
import { BackgroundSubscriber, decodeBatch, replayFrom, TierView } from './vllm-subscriber.js';

/**
 * KV events published from the KV event thread, the path of `kvtier run`
 * and `kvtier serve`: the engine's thread writes integer records into a
 * ring, the thread encodes and sends them. What subscribers get must be
 * what the in-process publisher sends: the same tiers rebuilt, the same bytes.
 */

const TOPIC = 'kv-thread';
/** A GPU pool too small for the batch (preemptions) and a CPU tier too small for what is offloaded (evictions). */
const SMALL_POOLS = { ...FAST, tp: 2, gpuBlocks: 24, cpuBlocks: 12, maxNumSeqs: 8 } as const;

function workload(): RequestSpec[][] {
  const prefix = tokens(41, 48);
  return [sharedPrefixRequests(prefix, 8, 40, 40, 1), sharedPrefixRequests(prefix, 6, 24, 30, 2)];
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startThread(encoding: KvEventEncoding, ringWords?: number, batchWindowMs?: number): Promise<KvEventThread> {
  const thread = await KvEventThread.start({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', topic: TOPIC, encoding, ringWords, batchWindowMs });
  cleanups.push(() => thread.close());
  return thread;
}

/** A subscriber whose subscription is in place: the thread announces an empty engine until it is heard. */
async function joinedSubscriber(thread: KvEventThread): Promise<BackgroundSubscriber> {
  const subscriber = new BackgroundSubscriber(thread.endpoint, TOPIC);
  cleanups.push(() => subscriber.close());
  while (subscriber.received.length === 0) {
    thread.clearAll();
    await thread.caughtUp();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return subscriber;
}

function sortedHashes(keys: readonly string[]): bigint[] {
  return keys.map(eventBlockHash).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

describe('KV events from the KV event thread', () => {
  it.each<KvEventEncoding>(['map', 'array'])('a subscriber rebuilds, from events alone, the blocks each tier holds, and they equal what the engine reports (%s encoding)', async (encoding) => {
    const thread = await startThread(encoding);
    const subscriber = await joinedSubscriber(thread);
    await withEngine(SMALL_POOLS, async (engine: Engine) => {
      thread.attach(engine);
      expectAllMatchReference(await runWaves(engine, workload()), 14);
      await thread.caughtUp();
      await subscriber.until(BigInt(thread.published - 1));
      const messages = subscriber.received;
      const first = messages[0].seq;
      expect(messages.map((m) => m.seq)).toEqual(messages.map((_, i) => first + BigInt(i)));
      const view = new TierView();
      for (const message of messages) for (const event of decodeBatch(message.payload).events) view.apply(event);
      const blocks = probe(engine).cachedBlocks();
      expect(blocks.gpu.length).toBeGreaterThan(0);
      expect((blocks.cpu ?? []).length).toBeGreaterThan(0);
      expect(view.held('GPU')).toEqual(sortedHashes(blocks.gpu));
      expect(view.held('CPU')).toEqual(sortedHashes(blocks.cpu ?? []));
    });
  });

  it.each([0, 5])("publishes each step's batch with the bytes the in-thread encoder writes for the engine's own batch, none lost through a tiny ring (batch window %i ms)", async (batchWindowMs) => {
    // 64 words: most steps' records wait on the engine's side for room.
    const thread = await startThread('map', 64, batchWindowMs);
    await withEngine({ ...SMALL_POOLS, tp: 1 }, async (engine: Engine) => {
      const inThread: KvEventBatch[] = [];
      engine.addKvEventListener((batch) => inThread.push(batch));
      thread.attach(engine);
      await runWaves(engine, workload());
      await thread.caughtUp();
      expect(thread.published).toBe(inThread.length);
      const replayed = await replayFrom(thread.replayEndpoint as string, 0n);
      const encoder = new KvEventWireEncoder('map');
      expect(replayed.map((r) => r.seq)).toEqual(inThread.map((_, i) => BigInt(i)));
      expect(replayed.map((r) => Buffer.from(r.payload).toString('hex'))).toEqual(inThread.map((batch) => Buffer.from(encoder.encode(batch)).toString('hex')));
    });
  });

  it('stops taking an engine\'s events once detached, and counts every batch sent when closed', async () => {
    const thread = await startThread('map');
    await withEngine({ ...FAST, tp: 1, gpuBlocks: 32 }, async (engine: Engine) => {
      const detach = thread.attach(engine);
      engine.addRequest({ id: 'a', promptTokens: tokens(3, 40), maxTokens: 2 });
      await engine.run();
      detach();
      const written = thread.written;
      expect(written).toBeGreaterThan(0);
      engine.addRequest({ id: 'b', promptTokens: tokens(5, 40), maxTokens: 2 });
      await engine.run();
      expect(thread.written).toBe(written);
      await thread.close();
      expect(thread.published).toBe(written);
    });
  });

  it('refuses a bad option with a KvEventPublisherError naming it', async () => {
    await expect(KvEventThread.start({ endpoint: 'localhost:5557' })).rejects.toMatchObject({
      code: 'ERR_KVTIER_KV_EVENTS_PUBLISHER',
      message: expect.stringMatching(/endpoint must be a ZeroMQ endpoint .* got "localhost:5557"/),
    });
    await expect(KvEventThread.start({ endpoint: 'tcp://127.0.0.1:*', ringWords: 100 })).rejects.toMatchObject({
      code: 'ERR_KVTIER_KV_EVENTS_PUBLISHER',
      message: expect.stringMatching(/ringWords: expected a power of two .* got 100/),
    });
    await expect(KvEventThread.start({ endpoint: 'tcp://127.0.0.1:*', batchWindowMs: -1 })).rejects.toMatchObject({
      code: 'ERR_KVTIER_KV_EVENTS_PUBLISHER',
      message: expect.stringMatching(/batchWindowMs must be a number of milliseconds in \[0, 1000\], got -1/),
    });
  });
});
