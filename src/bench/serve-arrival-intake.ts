import { SeededRandom } from '../core/prng.js';
import { ArrivalIntake } from '../serve/frontend/arrival-intake.js';
import { arrivalRingWordsFor, ArrivalReader, ArrivalWriter, createArrivalBuffer } from '../serve/frontend/arrival-ring.js';
import { createRingBuffer, ringWordsFor, RingReader, RingWriter, type RingVisitor } from '../serve/frontend/token-ring.js';
import type { ServingEngine } from '../serve/serving-engine.js';
import { median } from './stats.js';

/**
 * The main thread's part of receiving completions from the front-end
 * thread, alone: per round, `perRound` arrivals written to the arrival ring
 * (the front end's work, not timed), then one poll of the serving loop's
 * step boundary timed (ArrivalIntake: read each arrival, queue it on the
 * ServingEngine with ServingEngine.submit, the token ring as its step
 * sink and the intake as its end sink, answer in the token ring; the answer
 * is published with the next step's tokens, as the serving loop steps next).
 * Beside it, in the same round (first or second in turn) and on the same engine, the same
 * requests queued by a library caller (ServingEngine.stream): the intake's
 * cost beyond it is what the transport adds per arrival. Requests are aborted between rounds,
 * outside the timing, before any step takes them. Short rounds, median kept
 * after warm-up rounds, as for the ring delivery.
 */
export interface ArrivalIntakeCost {
  /** Median µs per arrival: the intake's poll, and ServingEngine.stream. */
  readonly intakeUs: number;
  readonly libraryUs: number;
}

export async function measureArrivalIntake(serving: ServingEngine, promptTokens: number, maxTokens: number, perRound = 4, rounds = 60, warmupRounds = 15): Promise<ArrivalIntakeCost> {
  const config = serving.engine.config;
  const arrivals = createArrivalBuffer(arrivalRingWordsFor(config.maxModelLen));
  const writer = new ArrivalWriter(arrivals);
  const tokenRing = createRingBuffer(ringWordsFor(config.maxNumSeqs));
  const tokenWriter = new RingWriter(tokenRing);
  const tokenReader = new RingReader(tokenRing, () => tokenWriter.resume());
  const visitor: RingVisitor = { tokens: () => {}, finish: () => {}, refused: () => {}, admitted: () => {} };
  const refusals: string[] = [];
  const intake = new ArrivalIntake(new ArrivalReader(arrivals, () => writer.resume()), serving, tokenWriter, {
    refused: (_slot, error) => refusals.push(error.message),
    finished: () => {},
    ended: () => {},
  });
  const random = new SeededRandom(11);
  const vocab = config.model.vocabSize;
  const spec = () => ({ promptTokens: Array.from(random.tokens(promptTokens, vocab)), maxTokens, seed: 0, cacheSalt: null });
  const perArrival = { intake: [] as number[], library: [] as number[] };
  let slot = 1;
  for (let round = 0; round < warmupRounds + rounds; round++) {
    // The front end's side: written and published before the timed poll.
    for (let i = 0; i < perRound; i++) writer.append(slot++, spec());
    writer.publish();
    const library = Array.from({ length: perRound }, spec);
    const ids: string[] = [];
    const timeIntake = (): bigint => {
      const started = process.hrtime.bigint();
      intake.poll();
      const ns = process.hrtime.bigint() - started;
      if (refusals.length > 0) throw new Error(`the engine refused an arrival: ${refusals[0]}`);
      ids.push(...intake.requests.values());
      intake.requests.clear();
      return ns;
    };
    const timeLibrary = (): bigint => {
      const started = process.hrtime.bigint();
      for (const s of library) ids.push(serving.stream(s).id);
      return process.hrtime.bigint() - started;
    };
    // The order alternates: the second of the two runs on caches the first warmed.
    let intakeNs: bigint;
    let libraryNs: bigint;
    if (round % 2 === 0) {
      intakeNs = timeIntake();
      libraryNs = timeLibrary();
    } else {
      libraryNs = timeLibrary();
      intakeNs = timeIntake();
    }
    for (const id of ids) serving.abort(id, 'measured');
    await untilIdle(serving);
    tokenReader.drain(visitor);
    if (round < warmupRounds) continue;
    perArrival.intake.push(Number(intakeNs) / perRound / 1000);
    perArrival.library.push(Number(libraryNs) / perRound / 1000);
  }
  return { intakeUs: median(perArrival.intake), libraryUs: median(perArrival.library) };
}

async function untilIdle(serving: ServingEngine): Promise<void> {
  for (let i = 0; serving.inFlight > 0 || serving.engine.hasPendingWork(); i++) {
    if (i === 10_000) throw new Error('the aborted requests of the arrival intake measurement never ended');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
