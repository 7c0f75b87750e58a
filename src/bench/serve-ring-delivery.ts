import { RingTokenSink } from '../serve/frontend/ring-token-sink.js';
import { createRingBuffer, ringWordsFor, RingReader, RingWriter, type RingVisitor } from '../serve/frontend/token-ring.js';
import type { TokenSink } from '../serve/request-stream.js';
import { median } from './stats.js';

/**
 * The main thread's per-step share of the front-end thread's path, alone:
 * `streams` requests each given one token per step as ServingEngine's
 * delivery hands them to a request submitted with a sink (its ticket looked
 * up by request id, the sink called: a RingTokenSink writing a one-token
 * record), then one publish. Timed in a tight loop,
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
    // Fresh requests each round, as a new batch would bring; slots start at 1, as the front end gives them.
    const tickets = new Map<string, { started: boolean; sink: TokenSink }>();
    let slot = 1;
    for (const id of newTokens.keys()) tickets.set(id, { started: false, sink: new RingTokenSink(writer, slot++) });
    let ns = 0n;
    for (let step = 0; step < stepsPerRound; step++) {
      const started = process.hrtime.bigint();
      for (const [id, tokens] of newTokens) {
        const ticket = tickets.get(id)!;
        if (!ticket.started) ticket.started = true;
        try {
          ticket.sink.onTokens(tokens);
        } catch {
          throw new Error('the ring refused a token');
        }
      }
      writer.publish();
      ns += process.hrtime.bigint() - started;
      reader.drain(visitor);
    }
    if (round >= warmupRounds) perRound.push(Number(ns) / stepsPerRound / 1000);
  }
  // Short rounds, median: most run without being preempted on a shared machine, so the figure is the work's, not the wait's.
  return { usPerStep: median(perRound) };
}
