import type { ModelShape } from '../model/shape.js';
import { referenceGenerate } from '../model/reference.js';
import type { FinishedRequest } from '../runtime/engine-types.js';

/**
 * The integrity check: a finished request's output tokens must equal what
 * the reference model generates from its prompt alone (docs/architecture.md,
 * "Reference model"), whatever the cache, offloading, preemption or recovery did. Pure and
 * synchronous so it runs the same in a pool worker or in-process.
 */

/** What the check needs of a finished request (plain data, cheap to send to a worker). */
export type IntegrityItem = Pick<FinishedRequest, 'id' | 'promptTokens' | 'outputTokens' | 'maxTokens' | 'seed' | 'stopToken'> & {
  readonly finishReason: 'length' | 'stopped';
};

/** One pool task: a batch checked by workers/integrity-worker.ts. */
export interface IntegrityTask {
  readonly shape: ModelShape;
  readonly items: readonly IntegrityItem[];
}

export interface IntegrityMismatch {
  readonly id: string;
  /** First output index where the engine and the reference differ. */
  readonly index: number;
  /** Token at `index`; null where that side has no token there. */
  readonly expected: number | null;
  readonly actual: number | null;
}

export interface IntegrityBatchResult {
  readonly checked: number;
  readonly mismatches: IntegrityMismatch[];
}

/**
 * The fields the check needs, or null for a request that did not run to
 * completion (aborted or failed: no full output for the reference to match).
 */
export function toIntegrityItem(finished: FinishedRequest): IntegrityItem | null {
  if (finished.finishReason !== 'length' && finished.finishReason !== 'stopped') return null;
  return {
    id: finished.id,
    promptTokens: finished.promptTokens,
    outputTokens: finished.outputTokens,
    maxTokens: finished.maxTokens,
    seed: finished.seed,
    stopToken: finished.stopToken,
    finishReason: finished.finishReason,
  };
}

/** The first index where `actual` departs from `expected`, or -1 if they are equal. */
function firstDifference(expected: readonly number[], actual: readonly number[]): number {
  const shorter = Math.min(expected.length, actual.length);
  for (let i = 0; i < shorter; i++) if (expected[i] !== actual[i]) return i;
  return expected.length === actual.length ? -1 : shorter;
}

/** Checks each item against the reference model. */
export function checkOutputs(shape: ModelShape, items: readonly IntegrityItem[]): IntegrityBatchResult {
  const mismatches: IntegrityMismatch[] = [];
  for (const item of items) {
    const reference = referenceGenerate(shape, item);
    const index = firstDifference(reference.outputTokens, item.outputTokens);
    if (index >= 0) {
      mismatches.push({
        id: item.id,
        index,
        expected: reference.outputTokens[index] ?? null,
        actual: item.outputTokens[index] ?? null,
      });
    }
  }
  return { checked: items.length, mismatches };
}
