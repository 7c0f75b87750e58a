import { mix } from '../model/mix.js';

/**
 * Deterministic pseudo-random numbers for workload generation. Everything a
 * workload draws comes from a stream seeded by integers (the run's seed, a
 * conversation index, a trace hash id...), so the same inputs always give the
 * same requests on every machine.
 */

const GOLDEN_GAMMA = 0x9e3779b9;

/** Folds non-negative integers (up to 2^53) into one 32-bit seed. */
export function seedFrom(...parts: readonly number[]): number {
  let h = 0x2545f491;
  for (const part of parts) {
    const low = part >>> 0;
    const high = Math.floor(part / 0x1_0000_0000) >>> 0;
    h = mix((h ^ mix(low)) >>> 0);
    h = mix((h ^ mix((high + GOLDEN_GAMMA) >>> 0)) >>> 0);
  }
  return h;
}

/** A Weyl sequence finished by murmur3's fmix32: cheap, stateless apart from a counter. */
export class SeededRandom {
  private state: number;

  constructor(seed: number) {
    this.state = mix(seed >>> 0);
  }

  /** A uniform 32-bit unsigned integer. */
  nextUint32(): number {
    this.state = (this.state + GOLDEN_GAMMA) >>> 0;
    return mix(this.state);
  }

  /** A uniform integer in [min, max] (inclusive). */
  nextInt(min: number, max: number): number {
    if (max < min) throw new RangeError(`nextInt: max ${max} is below min ${min}`);
    return min + (this.nextUint32() % (max - min + 1));
  }

  /** `count` token ids in [0, vocabSize). */
  tokens(count: number, vocabSize: number): Int32Array {
    const out = new Int32Array(count);
    for (let i = 0; i < count; i++) out[i] = this.nextUint32() % vocabSize;
    return out;
  }
}
