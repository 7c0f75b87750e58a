import { TINY } from '../support/tiny.js';
import { referenceGenerate } from '../../src/model/reference.js';
import type { FinishReason, FinishedRequest } from '../../src/runtime/engine-types.js';

export { TINY };

/** A finished request as the engine would report it; outputs default to the reference model's. */
export function finishedRequest(overrides: Partial<FinishedRequest> & { id: string }): FinishedRequest {
  const promptTokens = overrides.promptTokens ?? Int32Array.from({ length: 20 }, (_, i) => (i * 37 + overrides.id.length) % TINY.vocabSize);
  const maxTokens = overrides.maxTokens ?? 6;
  const seed = overrides.seed ?? 11;
  const reference = referenceGenerate(TINY, { promptTokens, maxTokens, seed });
  return {
    promptTokens,
    outputTokens: reference.outputTokens,
    maxTokens,
    seed,
    stopToken: null,
    finishReason: 'length' as FinishReason,
    errorMessage: null,
    arrivalMs: 0,
    firstScheduledMs: 5,
    firstTokenMs: 10,
    finishMs: 20,
    numPreemptions: 0,
    gpuPrefixHitTokens: 0,
    cpuTierHitTokens: 0,
    remoteHitTokens: 0,
    gpuPrefixRereadTokens: 0,
    cpuTierRereadTokens: 0,
    ...overrides,
  };
}

/** The same request with output token `index` replaced by a different one. */
export function corrupted(finished: FinishedRequest, index: number): FinishedRequest {
  const outputTokens = [...finished.outputTokens];
  outputTokens[index] = (outputTokens[index] + 1) % TINY.vocabSize;
  return { ...finished, outputTokens };
}
