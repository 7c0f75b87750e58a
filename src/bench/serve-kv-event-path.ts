import { KvEventPublisher } from '../events/kv-event-publisher.js';
import { KvEventRecorder } from '../events/kv-event-recorder.js';
import { SeededRandom } from '../core/prng.js';
import { KvEventWireEncoder } from '../events/vllm-wire.js';
import { median } from './stats.js';

/**
 * The main thread's per-step cost of KV events at `streams` decoding
 * requests, alone: the tiers' reports into the recorder, the step's batch
 * encoded and handed to a ZeroMQ PUB socket (a real KvEventPublisher on
 * loopback, with its replay buffer), as `kvtier serve --kv-events-endpoint`
 * does on the engine's thread. Timed in a tight loop, away from the engine,
 * like the ring delivery (serve-ring-delivery.ts).
 *
 * The step is a saturated decode step: one block in `blockSize` fills per
 * stream and step, so streams / blockSize blocks enter the GPU prefix cache
 * (a stored event each, with its parent and tokens) and the CPU tier (stored
 * on compute), and as many leave each tier (both full), each removal its own
 * event, interleaved with the stores as evictions make room.
 */
export interface KvEventPath {
  /** Median over the rounds of the wall time per step (µs): reports, encoding, publishing. */
  readonly usPerStep: number;
  /** Events and bytes of one step's batch. */
  readonly eventsPerStep: number;
  readonly bytesPerStep: number;
}

export async function measureKvEventPath(streams: number, blockSize = 16, stepsPerRound = 100, rounds = 40, warmupRounds = 10): Promise<KvEventPath> {
  const random = new SeededRandom(11);
  const hash = (): string => {
    let text = '';
    for (let i = 0; i < 16; i++) text += '0123456789abcdef'[random.below(16)];
    return text;
  };
  const blocksPerStep = Math.max(1, Math.round(streams / blockSize));
  // Hashes and tokens made up front: the caches hand the sinks arrays they already built.
  const steps = Array.from({ length: 8 }, () =>
    Array.from({ length: blocksPerStep }, () => ({
      stored: [hash()],
      parent: hash(),
      tokens: Array.from(random.tokens(blockSize, 128_256)),
      cpuStored: [hash()],
      gpuEvicted: hash(),
      cpuEvicted: hash(),
    })),
  );
  const publisher = await KvEventPublisher.start({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*' });
  try {
    const recorder = new KvEventRecorder();
    const gpu = recorder.sinkFor('GPU', blockSize);
    const cpu = recorder.sinkFor('CPU', blockSize);
    let events = 0;
    let bytes = 0;
    const encoder = new KvEventWireEncoder('map');
    recorder.addListener((batch) => {
      if (events === 0) {
        events = batch.events.length;
        bytes = encoder.encode(batch).length;
      }
      publisher.publish(batch);
    });
    const perRound: number[] = [];
    let step = 0;
    for (let round = 0; round < warmupRounds + rounds; round++) {
      const started = process.hrtime.bigint();
      for (let i = 0; i < stepsPerRound; i++) {
        for (const block of steps[step++ % steps.length]) {
          gpu.removed(block.gpuEvicted);
          gpu.stored(block.stored, block.parent, block.tokens);
          cpu.removed(block.cpuEvicted);
          cpu.stored(block.cpuStored, null, []);
        }
        recorder.flush(Date.now() / 1000);
      }
      const ns = process.hrtime.bigint() - started;
      // The sends complete between rounds, outside the timed part, as they would between steps.
      await publisher.drain();
      if (round >= warmupRounds) perRound.push(Number(ns) / stepsPerRound / 1000);
    }
    return { usPerStep: median(perRound), eventsPerStep: events, bytesPerStep: bytes };
  } finally {
    await publisher.close();
  }
}
