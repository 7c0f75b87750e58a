import type { EngineConfigInput, RequestSpec } from '../../src/runtime/engine-types.js';
import { SeededRandom } from '../../src/core/prng.js';
import { FAST } from './helpers.js';

/**
 * One seeded chaos run: an engine shape (tp, a small GPU pool that forces
 * preemption, CPU tier geometry and policies), a random mix of faults on
 * different ranks, and a workload of requests sharing prefixes whose later
 * waves come back for prompts the first wave computed (so they load from the
 * CPU tier while faults hit the loads).
 */
export interface ChaosRun {
  readonly seed: number;
  readonly config: EngineConfigInput;
  readonly waves: RequestSpec[][];
}

function pick<T>(random: SeededRandom, values: readonly T[]): T {
  return values[random.nextInt(0, values.length - 1)];
}

/** A probability in [lo, hi], two decimals. */
function probability(random: SeededRandom, lo: number, hi: number): number {
  return Math.round((lo + ((hi - lo) * random.nextInt(0, 1000)) / 1000) * 100) / 100;
}

function chaosFaults(random: SeededRandom, tp: number, gpuBlocks: number): { faults: string; rankRestart: boolean } {
  const rank = (): number => random.nextInt(0, tp - 1);
  const rules: string[] = [];
  rules.push(`load-fail:rank=${rank()},p=${probability(random, 0.05, 0.4)}`);
  if (random.nextInt(0, 3) > 0) rules.push(`store-fail:rank=${rank()},p=${probability(random, 0.05, 0.4)}`);
  if (random.nextInt(0, 3) > 0) rules.push(`delay:rank=${rank()},ms=${random.nextInt(1, 8)}`);
  if (random.nextInt(0, 2) === 0) {
    const blocks = [random.nextInt(0, gpuBlocks - 1), random.nextInt(0, gpuBlocks - 1)];
    rules.push(`load-fail:rank=${rank()},blocks=${blocks.join('|')},after=${random.nextInt(0, 40)}`);
  }
  // Every fourth run or so also loses a rank mid-run and restarts it.
  const rankRestart = random.nextInt(0, 3) === 0;
  if (rankRestart) rules.push(`crash:rank=${rank()},step=${random.nextInt(10, 120)},how=${pick(random, ['throw', 'exit'])}`);
  return { faults: rules.join(';'), rankRestart };
}

function chaosWorkload(random: SeededRandom, seed: number, vocabSize: number): RequestSpec[][] {
  const prefixes = Array.from({ length: random.nextInt(2, 4) }, () => Array.from(random.tokens(random.nextInt(2, 6) * 16, vocabSize)));
  let next = 0;
  const request = (promptTokens: number[]): RequestSpec => ({
    id: `s${seed}-r${next++}`,
    promptTokens,
    maxTokens: random.nextInt(3, 16),
    seed: random.nextUint32(),
  });
  const newPrompt = (): number[] => [...pick(random, prefixes), ...random.tokens(random.nextInt(4, 40), vocabSize)];
  const first = Array.from({ length: random.nextInt(8, 12) }, () => newPrompt());
  const fresh = Array.from({ length: random.nextInt(2, 5) }, () => newPrompt());
  // Later waves ask again for earlier prompts (CPU-tier loads once the small GPU pool dropped them) and add new ones.
  return [
    first.map(request),
    [...first, ...fresh].map(request),
    [...first.filter(() => random.nextInt(0, 1) === 0), ...fresh].map(request),
  ];
}

export function chaosRun(seed: number, vocabSize: number): ChaosRun {
  const random = new SeededRandom(seed);
  const tp = seed % 2 === 0 ? 2 : 4;
  const gpuBlocks = pick(random, [16, 20, 24, 32]);
  const { faults, rankRestart } = chaosFaults(random, tp, gpuBlocks);
  const config: EngineConfigInput = {
    ...FAST,
    tp,
    gpuBlocks,
    cpuBlocks: pick(random, [48, 128, 512]),
    offloadFactor: pick(random, [1, 1, 2]),
    maxNumSeqs: random.nextInt(2, 6),
    maxNumBatchedTokens: pick(random, [64, 256, 2048]),
    eviction: pick(random, ['lru', 'arc'] as const),
    storePolicy: pick(random, ['on-compute', 'on-compute', 'on-evict', 'reuse:2'] as const),
    layout: pick(random, ['cross-layer', 'per-layer'] as const),
    faults,
    faultSeed: seed,
    rankRestart,
    stepDeadlineMs: 10_000,
  };
  return { seed, config, waves: chaosWorkload(random, seed, vocabSize) };
}
