import { RequestStream } from '../serve/request-stream.js';
import { RingTokenSink } from '../serve/frontend/ring-token-sink.js';
import { createRingBuffer, ringWordsFor, RingReader, RingWriter, type RingVisitor } from '../serve/frontend/token-ring.js';
import { median } from './stats.js';

/**
 * The main thread's per-step share of the front-end thread's path, alone:
 * `streams` requests each given one token per step as the serving loop
 * delivers them (a ticket looked up by request id, RequestStream.push, a
 * RingTokenSink writing the ring, the stream keeping no copy as on the
 * front-end thread's path), then one publish. Timed in a tight loop,
 * away from the engine, so a few microseconds per step are resolved where
 * the whole batch's accounting (hundreds of microseconds per step of engine
 * work on a shared machine) cannot. The ring is read between steps on the
 * same thread, outside the timed part, as the front end would. Rounds are
 * short (200 steps) and the median is kept, after warm-up rounds for the JIT.
 */
export interface RingDelivery {
  /** Median over the rounds of the wall time per step (µs) of delivery and publish. */
  readonly usPerStep: number;
}

export function measureRingDelivery(streams: number, stepsPerRound = 200, rounds = 60, warmupRounds = 15): RingDelivery {
  const buffer = createRingBuffer(ringWordsFor(streams));
  const writer = new RingWriter(buffer);
  const reader = new RingReader(buffer, () => writer.resume());
  const visitor: RingVisitor = { tokens: () => {}, finish: () => {} };
  const newTokens = new Map<string, number[]>();
  for (let slot = 0; slot < streams; slot++) newTokens.set(`request-${slot}`, [slot]);
  const perRound: number[] = [];
  for (let round = 0; round < warmupRounds + rounds; round++) {
    // Fresh requests each round, as a new batch would bring (a stream keeps every token it was given).
    const tickets = new Map<string, RequestStream>();
    let slot = 0;
    for (const id of newTokens.keys()) {
      const stream = new RequestStream(id, () => {});
      stream.attach(new RingTokenSink(writer, slot++), { keepTokens: false });
      tickets.set(id, stream);
    }
    let ns = 0n;
    for (let step = 0; step < stepsPerRound; step++) {
      const started = process.hrtime.bigint();
      for (const [id, tokens] of newTokens) tickets.get(id)!.push(tokens);
      writer.publish();
      ns += process.hrtime.bigint() - started;
      reader.drain(visitor);
    }
    if (round >= warmupRounds) perRound.push(Number(ns) / stepsPerRound / 1000);
  }
  // Short rounds, median: most run without being preempted on a shared machine, so the figure is the work's, not the wait's.
  return { usPerStep: median(perRound) };
}
