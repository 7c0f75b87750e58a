import { SeededRandom, seedFrom } from '../core/prng.js';

/**
 * Token ids for trace replay. A trace carries no text, only block hash ids;
 * each id becomes a fixed block of pseudo-random tokens (seeded by the id), so
 * two requests that share hash ids share those prompt tokens, and the
 * engine's prefix cache sees exactly the sharing the trace recorded. A scaled
 * block (fewer tokens per id) is a prefix of the unscaled one, so sharing
 * survives token scaling.
 */

/** Keeps trace token streams apart from every other seeded stream. */
const TRACE_TOKEN_STREAM = 0x74726365;

/** The first `blockTokens` tokens of hash id `hashId`'s block, each in [0, vocabSize). */
export function traceBlockTokens(hashId: number, blockTokens: number, vocabSize: number): Int32Array {
  return new SeededRandom(seedFrom(TRACE_TOKEN_STREAM, hashId)).tokens(blockTokens, vocabSize);
}

/**
 * A request's prompt: its hash ids' blocks concatenated and cut to
 * `promptLength` tokens (the last block is usually partial).
 */
export function tracePromptTokens(
  hashIds: readonly number[],
  promptLength: number,
  blockTokens: number,
  vocabSize: number,
): Int32Array {
  if (promptLength > hashIds.length * blockTokens) {
    throw new RangeError(`prompt of ${promptLength} tokens needs more than ${hashIds.length} blocks of ${blockTokens} tokens`);
  }
  const prompt = new Int32Array(promptLength);
  for (let b = 0; b * blockTokens < promptLength; b++) {
    const start = b * blockTokens;
    const length = Math.min(blockTokens, promptLength - start);
    prompt.set(traceBlockTokens(hashIds[b], length, vocabSize), start);
  }
  return prompt;
}
