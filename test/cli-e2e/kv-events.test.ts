import { afterEach, describe, expect, it } from 'vitest';
import { Subscriber } from 'zeromq';
import { decodeBatch, TierView } from '../events/vllm-subscriber.js';
import { kvtier } from './cli.js';

/**
 * `kvtier run --kv-events-endpoint`: a subscriber that binds (a router
 * collecting events) gets the run's KV event batches from the command, which
 * connects to it as vLLM's publisher does for an endpoint without a wildcard.
 */

const sockets: Subscriber[] = [];
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.close();
});

describe('kvtier run publishing KV events', () => {
  it('sends every step batch in vLLM framing to a subscriber, and says how many it sent', async () => {
    const sub = new Subscriber({ receiveHighWaterMark: 0, linger: 0 });
    sockets.push(sub);
    await sub.bind('tcp://127.0.0.1:*');
    sub.subscribe('kv');
    const received: { topic: string; seq: bigint; payload: Buffer }[] = [];
    const waiter: { wake: (() => void) | null } = { wake: null };
    const reading = (async () => {
      try {
        for await (const [topic, seq, payload] of sub) {
          received.push({ topic: topic.toString('utf8'), seq: seq.readBigUInt64BE(), payload });
          waiter.wake?.();
        }
      } catch {
        // closed
      }
    })();

    const endpoint = sub.lastEndpoint as string;
    const result = await kvtier([
      'run', '--requests', '8', '--rounds', '2', '--gpu-blocks', '48', '--cpu-blocks', '24',
      '--kv-events-endpoint', endpoint, '--kv-events-topic', 'kv',
    ]);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(`kvtier: publishing KV events at ${endpoint} (topic "kv")\n`);
    const published = /^kvtier: published (\d+) KV event batches at /m.exec(result.stderr);
    expect(published).not.toBeNull();
    const last = BigInt(Number(published![1]) - 1);
    // The command lingers until its queue is sent: the last batch arrives.
    while (!received.some((m) => m.seq === last)) await new Promise<void>((resolve) => (waiter.wake = resolve));
    sub.close();
    await reading;

    // Batches sent before the subscription reached the command are gone (PUB semantics); from the first one heard, none is missing.
    expect(received.length).toBeGreaterThan(0);
    expect(received.every((m) => m.topic === 'kv')).toBe(true);
    expect(received.map((m) => m.seq)).toEqual(received.map((_, i) => received[0].seq + BigInt(i)));
    const view = new TierView();
    for (const message of received) for (const event of decodeBatch(message.payload).events) view.apply(event);
    expect(view.media.has('GPU')).toBe(true);
    expect(result.stdout).toMatch(/^kvtier run: /);
  });
});
