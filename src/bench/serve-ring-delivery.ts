import { createRingBuffer, ringWordsFor, RingReader, RingWriter, type RingVisitor } from '../serve/frontend/token-ring.js';
import type { StepTokenSink } from '../serve/step-token-sink.js';
import { median } from './stats.js';

/**
 * The main thread's per-step share of the front-end thread's path, alone:
 * `streams` requests each given one token per step as ServingEngine's
 * delivery hands them to requests submitted with a step sink (the token
 * ring's writer opened once for the step, each request's ticket looked up
 * by request id and its tokens handed over by its slot: a one-token record,
 * two stores), then the step closed: one publish. Timed in a tight loop,
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
  const visitor: RingVisitor = { tokens: () => {}, finish: () => {}, refused: () => {}, admitted: () => {} };
  const newTokens = new Map<string, number[]>();
  for (let slot = 0; slot < streams; slot++) newTokens.set(`request-${slot}`, [slot]);
  const perRound: number[] = [];
  for (let round = 0; round < warmupRounds + rounds; round++) {
    // Fresh requests each round, as a new batch would bring; slots start at 1, as the front end gives them.
    const tickets = new Map<string, { started: boolean; stepSink: StepTokenSink | null; sinkKey: number }>();
    let slot = 1;
    for (const id of newTokens.keys()) tickets.set(id, { started: false, stepSink: writer, sinkKey: slot++ });
    let ns = 0n;
    for (let step = 0; step < stepsPerRound; step++) {
      const started = process.hrtime.bigint();
      writer.beginStep(newTokens.size);
      for (const [id, tokens] of newTokens) {
        const ticket = tickets.get(id)!;
        if (!ticket.started) ticket.started = true;
        try {
          ticket.stepSink!.tokens(ticket.sinkKey, tokens);
        } catch {
          throw new Error('the ring refused a token');
        }
      }
      writer.endStep();
      ns += process.hrtime.bigint() - started;
      reader.drain(visitor);
    }
    if (round >= warmupRounds) perRound.push(Number(ns) / stepsPerRound / 1000);
  }
  // Short rounds, median: most run without being preempted on a shared machine, so the figure is the work's, not the wait's.
  return { usPerStep: median(perRound) };
}
