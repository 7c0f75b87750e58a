import type { EngineMetrics } from '../../src/runtime/engine-types.js';

const NO_TRANSFERS = { jobs: 0, failedJobs: 0, bytes: 0, busyMs: 0, copyJobs: 0 };

/** Engine metrics of an engine that ran one step and did nothing, with `overrides` on top. */
export function quietEngineMetrics(overrides: Partial<EngineMetrics> = {}): EngineMetrics {
  return {
    steps: 1,
    preemptions: 0,
    requests: { added: 0, finished: 0, aborted: 0, failed: 0 },
    tokens: { prompt: 0, output: 0, prefillComputed: 0, recomputed: 0, promptReached: 0 },
    hits: { gpuPrefixTokens: 0, cpuTierTokens: 0 },
    rereads: { gpuPrefixTokens: 0, cpuTierTokens: 0 },
    transfers: { gpuToCpu: NO_TRANSFERS, cpuToGpu: NO_TRANSFERS },
    loadFailures: { blocks: 0, requestsRecovered: 0 },
    storeFailures: 0,
    rankRestarts: 0,
    leaks: { gpuBlocks: 0, cpuBlocks: 0 },
    stepClock: { description: 'tiny on h100-sxm x2 (NVIDIA H100 SXM 80GB, default)', modelledComputeMs: 0, forwardMs: 0 },
    ...overrides,
  };
}
