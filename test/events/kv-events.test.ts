import { afterEach, describe, expect, it } from 'vitest';
import { KvEventPublisher } from '../../src/events/kv-event-publisher.js';
import type { KvEventBatch } from '../../src/events/kv-cache-events.js';
import { eventBlockHash, type KvEventEncoding } from '../../src/events/vllm-wire.js';
import type { Engine } from '../../src/runtime/engine.js';
import type { RequestSpec } from '../../src/runtime/engine-types.js';
import { probe } from '../../src/testing/index.js';
import { expectAllMatchReference, FAST, runWaves, sharedPrefixRequests, tokens, withEngine } from '../e2e/helpers.js';
import { BackgroundSubscriber, decodeBatch, replayFrom, TierView, type DecodedEvent } from './vllm-subscriber.js';

const TOPIC = 'kv-events';

/** A GPU pool too small for the batch (preemptions) and a CPU tier too small for what is offloaded (evictions). */
const SMALL_POOLS = { ...FAST, tp: 2, gpuBlocks: 24, cpuBlocks: 12, maxNumSeqs: 8 } as const;

/** Two waves of requests sharing a prefix, the second rereading what the first left in the tiers. */
function workload(): RequestSpec[][] {
  const prefix = tokens(41, 48);
  return [sharedPrefixRequests(prefix, 8, 40, 40, 1), sharedPrefixRequests(prefix, 6, 24, 30, 2)];
}

/** The engine's own listing of each tier, as the integers events carry. */
function engineHoldings(engine: Engine): { gpu: bigint[]; cpu: bigint[] } {
  const blocks = probe(engine).cachedBlocks();
  const sorted = (keys: readonly string[]) => keys.map(eventBlockHash).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return { gpu: sorted(blocks.gpu), cpu: sorted(blocks.cpu ?? []) };
}

function countKinds(events: readonly DecodedEvent[], kind: DecodedEvent['kind'], medium?: string): number {
  return events.filter((e) => e.kind === kind && (medium === undefined || ('medium' in e && e.medium === medium))).length;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A publisher with a replay socket keeping `bufferSteps` batches, after `count` one-removal batches were published and sent. */
async function replayingPublisher(bufferSteps: number, count: number): Promise<KvEventPublisher> {
  const publisher = await KvEventPublisher.start({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', bufferSteps });
  cleanups.push(() => publisher.close());
  const removal = (i: number): KvEventBatch => ({ ts: i, events: [{ type: 'BlockRemoved', blockHashes: [i.toString(16).padStart(16, '0')], medium: 'GPU' }] });
  for (let i = 0; i < count; i++) publisher.publish(removal(i));
  await publisher.drain();
  return publisher;
}

async function startPublisher(encoding: KvEventEncoding): Promise<KvEventPublisher> {
  const publisher = await KvEventPublisher.start({
    endpoint: 'tcp://127.0.0.1:*',
    replayEndpoint: 'tcp://127.0.0.1:*',
    topic: TOPIC,
    encoding,
  });
  cleanups.push(() => publisher.close());
  return publisher;
}

/**
 * Connects a subscriber and makes sure its subscription is in place before the
 * run: the publisher announces an empty engine (AllBlocksCleared) until the
 * subscriber hears it (a PUB socket drops what it sends before a subscription arrives).
 */
async function joinedSubscriber(publisher: KvEventPublisher): Promise<BackgroundSubscriber> {
  const subscriber = new BackgroundSubscriber(publisher.endpoint, TOPIC);
  cleanups.push(() => subscriber.close());
  while (subscriber.received.length === 0) {
    publisher.publish({ ts: Date.now() / 1000, events: [{ type: 'AllBlocksCleared' }] });
    await publisher.drain();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return subscriber;
}

describe.each<KvEventEncoding>(['map', 'array'])('KV events over ZeroMQ (%s-encoded events)', (encoding) => {
  it('a subscriber rebuilds, from events alone, the blocks each tier holds, and they equal what the engine reports', async () => {
    const publisher = await startPublisher(encoding);
    const subscriber = await joinedSubscriber(publisher);
    await withEngine(SMALL_POOLS, async (engine) => {
      publisher.attach(engine);
      const finished = await runWaves(engine, workload());
      expectAllMatchReference(finished, 14);
      await publisher.drain();
      await subscriber.until(BigInt(publisher.published - 1));

      const messages = subscriber.received;
      expect(messages.every((m) => m.topic === TOPIC)).toBe(true);
      // Sequence numbers go up by one from the first message the subscriber heard to the last published.
      const first = messages[0].seq;
      expect(messages.map((m) => m.seq)).toEqual(messages.map((_, i) => first + BigInt(i)));
      expect(messages[messages.length - 1].seq).toBe(BigInt(publisher.published - 1));

      const view = new TierView();
      const events: DecodedEvent[] = [];
      for (const message of messages) {
        const batch = decodeBatch(message.payload);
        expect(batch.dataParallelRank).toBe(0);
        expect(batch.events.length).toBeGreaterThan(0);
        for (const event of batch.events) {
          view.apply(event);
          events.push(event);
        }
      }

      // The run exercised what the events must follow: preemptions, GPU evictions, CPU-tier evictions.
      const metrics = engine.metrics();
      expect(metrics.preemptions).toBeGreaterThan(0);
      expect(probe(engine).holdings().cpuTier?.evictions).toBeGreaterThan(0);
      expect(countKinds(events, 'BlockRemoved', 'GPU')).toBeGreaterThan(0);
      expect(countKinds(events, 'BlockRemoved', 'CPU')).toBeGreaterThan(0);
      expect(countKinds(events, 'BlockStored', 'CPU')).toBeGreaterThan(0);

      const held = engineHoldings(engine);
      expect(held.gpu.length).toBeGreaterThan(0);
      expect(held.cpu.length).toBeGreaterThan(0);
      expect(view.held('GPU')).toEqual(held.gpu);
      expect(view.held('CPU')).toEqual(held.cpu);
    });
  });
});

describe('KV event contents', () => {
  it('a GPU store names its chain: parent, one hash per block, block_size tokens per block', async () => {
    const publisher = await startPublisher('map');
    const subscriber = await joinedSubscriber(publisher);
    const prompt = tokens(7, 16 * 3 + 5);
    await withEngine({ ...FAST, tp: 1, gpuBlocks: 32, blockSize: 16 }, async (engine) => {
      publisher.attach(engine);
      engine.addRequest({ id: 'a', promptTokens: prompt, maxTokens: 2 });
      await engine.run();
      await publisher.drain();
      await subscriber.until(BigInt(publisher.published - 1));
      const stored = subscriber.received
        .flatMap((m) => decodeBatch(m.payload).events)
        .filter((e): e is Extract<DecodedEvent, { kind: 'BlockStored' }> => e.kind === 'BlockStored');
      // The prompt's three full blocks enter the cache in the step that computes them: one chain from the start.
      expect(stored[0]).toMatchObject({ parent: null, blockSize: 16, medium: 'GPU', loraId: null });
      expect(stored[0].hashes).toHaveLength(3);
      expect(stored[0].tokenIds).toEqual(prompt.slice(0, 48));
      const held = engineHoldings(engine).gpu;
      for (const hash of stored[0].hashes) expect(held).toContain(hash);
    });
  });

  it('a late subscriber recovers every batch through the replay socket, byte for byte what was published', async () => {
    const publisher = await startPublisher('map');
    const subscriber = await joinedSubscriber(publisher);
    await withEngine({ ...SMALL_POOLS, tp: 1 }, async (engine) => {
      publisher.attach(engine);
      await runWaves(engine, workload().slice(0, 1));
      await publisher.drain();
      await subscriber.until(BigInt(publisher.published - 1));
      const replayed = await replayFrom(publisher.replayEndpoint as string, 0n);
      expect(replayed.map((r) => r.seq)).toEqual(Array.from({ length: publisher.published }, (_, i) => BigInt(i)));
      const live = new Map(subscriber.received.map((m) => [m.seq, Buffer.from(m.payload).toString('hex')]));
      for (const r of replayed) if (live.has(r.seq)) expect(Buffer.from(r.payload).toString('hex')).toBe(live.get(r.seq));
      // A request from a later sequence number gets only what follows it.
      const tail = await replayFrom(publisher.replayEndpoint as string, BigInt(publisher.published - 2));
      expect(tail.map((r) => r.seq)).toEqual([BigInt(publisher.published - 2), BigInt(publisher.published - 1)]);
    });
  });

  it('a replay client that reads slowly still gets every batch, none dropped for want of room in its queue', async () => {
    const publisher = await replayingPublisher(5000, 5000);
    const replayed = await replayFrom(publisher.replayEndpoint as string, 0n, true);
    expect(replayed.map((r) => r.seq)).toEqual(Array.from({ length: 5000 }, (_, i) => BigInt(i)));
    // The slow client did not stop the socket: the next request is answered too.
    expect((await replayFrom(publisher.replayEndpoint as string, 4998n)).map((r) => r.seq)).toEqual([4998n, 4999n]);
  });

  it('replay keeps the last bufferSteps batches, oldest first, once more were published', async () => {
    const publisher = await replayingPublisher(3, 7);
    const replayed = await replayFrom(publisher.replayEndpoint as string, 0n);
    expect(replayed.map((r) => r.seq)).toEqual([4n, 5n, 6n]);
    expect(replayed.map((r) => decodeBatch(r.payload).ts)).toEqual([4, 5, 6]);
    expect((await replayFrom(publisher.replayEndpoint as string, 6n)).map((r) => r.seq)).toEqual([6n]);
  });

  it('the async iterator yields at most one batch per step; a rank lost and restarted clears every tier', async () => {
    await withEngine(
      { ...SMALL_POOLS, tp: 2, faults: 'crash:rank=1,step=12,how=throw', rankRestart: true },
      async (engine) => {
        const batches: KvEventBatch[] = [];
        const stream = engine.kvEvents();
        const reading = (async () => {
          for await (const batch of stream) batches.push(batch);
        })();
        const finished = await runWaves(engine, workload());
        expectAllMatchReference(finished, 14);
        expect(engine.metrics().rankRestarts).toBe(1);
        stream.close();
        await reading;

        expect(batches.length).toBeGreaterThan(0);
        expect(batches.length).toBeLessThanOrEqual(engine.metrics().steps);
        const kinds = batches.flatMap((b) => b.events.map((e) => e.type));
        expect(kinds).toContain('AllBlocksCleared');
        // Rebuild with kvtier's own hashes this time: the in-process view equals the engine's listing too.
        const gpu = new Set<string>();
        const cpu = new Set<string>();
        for (const event of batches.flatMap((b) => b.events)) {
          if (event.type === 'AllBlocksCleared') {
            gpu.clear();
            cpu.clear();
            continue;
          }
          const tier = event.medium === 'GPU' ? gpu : cpu;
          for (const hash of event.blockHashes) {
            if (event.type === 'BlockStored') tier.add(hash);
            else tier.delete(hash);
          }
        }
        const blocks = probe(engine).cachedBlocks();
        expect([...gpu].sort()).toEqual([...blocks.gpu].sort());
        expect([...cpu].sort()).toEqual([...(blocks.cpu ?? [])].sort());
      },
    );
  });
});

describe('KV event publisher options', () => {
  it.each([
    [{ endpoint: 'localhost:5557' }, /endpoint must be a ZeroMQ endpoint .* got "localhost:5557"/],
    [{ endpoint: 'tcp://*:0', replayEndpoint: 'udp://x' }, /replayEndpoint must be a ZeroMQ endpoint/],
    [{ endpoint: 'tcp://*:0', encoding: 'json' as KvEventEncoding }, /encoding must be 'map' or 'array', got "json"/],
    [{ endpoint: 'tcp://*:0', bufferSteps: 0 }, /bufferSteps must be an integer >= 1, got 0/],
  ])('refuses %o with a KvEventPublisherError naming the option', async (options, message) => {
    await expect(KvEventPublisher.start(options)).rejects.toMatchObject({ code: 'ERR_KVTIER_KV_EVENTS_PUBLISHER', message: expect.stringMatching(message) });
  });
});
