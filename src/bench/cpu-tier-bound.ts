import { defaultReplayClock, describeReplayClock, type ReplayClock } from './replay-clock.js';
import type { CpuTierBoundAnalysis } from '../analysis/analyze.js';
import type { Trace } from '../workload/trace.js';
import { replayGeometry, replaySliceOf, type ReplayOptions, type ReplaySlice } from './policies.js';
import { tierStreamBound, tierStreamCeiling, tierStreamProvenBound } from './tier-stream-belady.js';
import { recordTierStream } from './tier-stream-replay.js';

/**
 * The CPU tier's bound and ceiling for a trace slice behind a GPU tier, from
 * one simulated replay: the one with a tier that stores every computed block
 * and serves no hit (recordTierStream). That stream depends on no policy and
 * no capacity, so one replay serves every point of a sweep, and every block
 * past a GPU hit is offered, so no write opportunity is missing. A tier that
 * serves hits changes what runs when (a loaded prefix is not computed), which
 * moves the stream, and so the bound, by a few percent; a policy's hits in its
 * own replay are set against this one replay's bound.
 */

/** The bound at one capacity. */
export interface CpuTierBoundPoint {
  readonly cpuBlocks: number;
  /** Belady's MIN with bypass (tier-stream-belady.ts): CPU-tier prefix hit tokens. */
  readonly hitTokens: number;
  /**
   * A bound proven for every policy (tierStreamProvenBound): at least
   * hitTokens, and close to it where MIN's prefix hits are near optimal.
   */
  readonly provenBoundTokens: number;
}

export interface CpuTierBounds {
  readonly bound: readonly CpuTierBoundPoint[];
  /** An unbounded CPU tier over the same stream: CPU-tier hit tokens. Every bound is at most this. */
  readonly ceilingHitTokens: number;
}

export async function cpuTierBounds(
  slice: ReplaySlice,
  options: Omit<ReplayOptions, 'cpuBlocks'>,
  capacities: readonly number[],
): Promise<CpuTierBounds> {
  const stream = await recordTierStream(slice, options);
  return {
    bound: capacities.map((cpuBlocks) => {
      const { hitTokens } = tierStreamBound(stream, cpuBlocks);
      return { cpuBlocks, hitTokens, provenBoundTokens: tierStreamProvenBound(stream, cpuBlocks).hitTokens };
    }),
    ceilingHitTokens: tierStreamCeiling(stream).hitTokens,
  };
}

export interface CpuTierBoundSettings {
  readonly gpuBlocks: number;
  readonly cpuBlocks: number;
  readonly blockSize: number;
  readonly offloadFactor: number;
  /** The replay's clock (default: the modelled one, llama-8b on an H100). */
  readonly clock?: ReplayClock;
}

/** The bound at one capacity and the ceiling, for `kvtier analyze`. */
export async function cpuTierBoundAnalysis(trace: Trace, settings: CpuTierBoundSettings): Promise<CpuTierBoundAnalysis> {
  const { gpuBlocks, cpuBlocks, blockSize, offloadFactor } = settings;
  const clock = settings.clock ?? defaultReplayClock();
  const slice = replaySliceOf(trace);
  const bounds = await cpuTierBounds(slice, { gpuBlocks, geometry: replayGeometry(blockSize, offloadFactor), clock }, [cpuBlocks]);
  const { hitTokens, provenBoundTokens } = bounds.bound[0];
  const ceiling = bounds.ceilingHitTokens;
  return {
    method: 'belady-min-bypass-behind-gpu-tier',
    gpuBlocks,
    cpuBlocks,
    clock: describeReplayClock(clock),
    hitTokens,
    provenBoundTokens,
    ceilingHitTokens: ceiling,
    percentOfCeiling: ceiling === 0 ? 0 : (100 * hitTokens) / ceiling,
  };
}
