/**
 * Seeded randomness for tests (mulberry32): random scenarios that replay
 * exactly from their seed.
 */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Integer in [0, n). */
  below(n: number): number {
    return Math.floor(this.next() * n);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.below(items.length)];
  }
}

/** Deterministic prompt tokens: `length` tokens below `vocabSize` drawn from `seed`. */
export function promptOf(length: number, seed: number, vocabSize = 32000): number[] {
  const out: number[] = [];
  let x = (seed * 2654435761 + 12345) >>> 0;
  for (let i = 0; i < length; i++) {
    x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6b43a9b5) >>> 0;
    out.push(x % vocabSize);
  }
  return out;
}
