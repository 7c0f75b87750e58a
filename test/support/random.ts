import { SeededRandom } from '../../src/core/prng.js';

/** The project's seeded generator (src/core/prng.ts), under the name the tests use: random scenarios replay exactly from their seed. */
export { SeededRandom as Rng };

/** Deterministic prompt tokens: `length` tokens below `vocabSize` drawn from `seed`. */
export function promptOf(length: number, seed: number, vocabSize = 32000): number[] {
  return Array.from(new SeededRandom(seed).tokens(length, vocabSize));
}
