import { createRingBuffer, ringWordsFor, RingReader, RingWriter, type RingVisitor } from '../serve/frontend/token-ring.js';
import type { RequestTokens } from '../runtime/engine-types.js';
import { SampledTokenUpdate } from '../scheduler/step-records.js';
import type { StepTokenSink } from '../serve/step-token-sink.js';
import { median } from './stats.js';

/**
 * The main thread's per-step share of the front-end thread's path, alone:
 * `streams` requests each given one token per step as ServingEngine's
 * delivery hands them to requests submitted with a step sink (the token
 * ring's writer opened once for the step; each step update, the scheduler's
 * own kind (SampledTokenUpdate), carries its request's ticket, the owner
 * ServingEngine gave Engine.addRequest, and its token as a number, which
 * goes over by the ticket's slot: a one-token record, two stores), then the
 * step closed: one publish. The loop is ServingEngine.deliver's, kept in step with it. Timed in a tight loop,
 * away from the engine, so a few microseconds per step are resolved where
 * the whole batch's accounting (hundreds of microseconds per step of engine
 * work on a shared machine) cannot. The ring is read between steps on the
 * same thread, outside the timed part, as the front end would. Rounds are
 * short (200 steps) and the median is kept, after warm-up rounds for the JIT.
 */
/** ServingEngine's ticket, as much of it as delivery reads. */
class BenchTicket {
  started = false;
  ended = false;
  constructor(
    readonly serving: object,
    public stepSink: StepTokenSink | null,
    readonly sinkKey: number,
  ) {}
}

export interface RingDelivery {
  /** Median over the rounds of the wall time per step (µs) of delivery and publish. */
  readonly usPerStep: number;
}

export function measureRingDelivery(streams: number, stepsPerRound = 200, rounds = 60, warmupRounds = 15): RingDelivery {
  const buffer = createRingBuffer(ringWordsFor(streams));
  const writer = new RingWriter(buffer);
  const reader = new RingReader(buffer, () => writer.resume());
  const visitor: RingVisitor = { tokens: () => {}, finish: () => {}, refused: () => {}, admitted: () => {} };
  const serving = {};
  const perRound: number[] = [];
  for (let round = 0; round < warmupRounds + rounds; round++) {
    // Fresh requests each round, as a new batch would bring; slots start at 1, as the front end gives them.
    const updates: RequestTokens[] = Array.from({ length: streams }, (_, i) => new SampledTokenUpdate(`request-${i}`, i, new BenchTicket(serving, writer, i + 1)));
    let ns = 0n;
    for (let step = 0; step < stepsPerRound; step++) {
      const started = process.hrtime.bigint();
      writer.beginStep(updates.length);
      for (let i = 0; i < updates.length; i++) {
        const update = updates[i];
        const tokens = update.newTokenIds;
        const token = update.token;
        const ticket = update.owner;
        if ((token === undefined && tokens.length === 0) || !(ticket instanceof BenchTicket) || ticket.serving !== serving || ticket.ended) continue;
        if (!ticket.started) ticket.started = true;
        const sink = ticket.stepSink!;
        try {
          if (token !== undefined && sink.token !== undefined) sink.token(ticket.sinkKey, token);
          else sink.tokens(ticket.sinkKey, tokens);
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
