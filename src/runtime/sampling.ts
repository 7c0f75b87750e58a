import { EngineError } from '../core/errors.js';
import { sampleToken } from '../model/reference.js';
import { NO_TOKEN, type RankStepOutput, type ScheduledRequest, type SchedulerOutput } from '../protocol/step-protocol.js';

/**
 * Sampling of one step (docs/architecture.md, "Reference model"): each rank
 * computes a digest of its KV heads for every sampled request; the digests
 * are summed over ranks (the tensor-parallel reduction) and the token is drawn
 * from the sum, the request's seed and the position it is sampled at.
 */

/** The requests of a step that sample a token, in batch order (the order every rank reports digests in). */
export function sampledRequests(schedulerOutput: SchedulerOutput): ScheduledRequest[] {
  return schedulerOutput.requests.filter((r) => r.sample);
}

/**
 * The ranks' digests of each sampled request summed (uint32). Every rank
 * must report one digest per sampled request, in batch order; anything else
 * is a protocol error naming the rank.
 */
export function sumDigests(outputs: readonly RankStepOutput[], sampled: readonly ScheduledRequest[]): Uint32Array {
  const sums = new Uint32Array(sampled.length);
  for (const out of outputs) {
    if (out.sampledReqIds.length !== sampled.length || out.digests.length !== sampled.length) {
      throw new EngineError(`rank ${out.rank} returned ${out.digests.length} digests for ${sampled.length} sampled requests`);
    }
    for (let i = 0; i < sampled.length; i++) {
      if (out.sampledReqIds[i] !== sampled[i].reqId) {
        throw new EngineError(`rank ${out.rank} sampled ${out.sampledReqIds[i]} where ${sampled[i].reqId} was expected`);
      }
      sums[i] = (sums[i] + out.digests[i]) >>> 0;
    }
  }
  return sums;
}

/** The token each sampled request of the step gets, from the ranks' summed digests. */
export function sampleStepTokens(
  outputs: readonly RankStepOutput[],
  schedulerOutput: SchedulerOutput,
  vocabSize: number,
): Int32Array {
  const batch = schedulerOutput.requests;
  const tokens = new Int32Array(batch.length).fill(NO_TOKEN);
  const sampled = sampledRequests(schedulerOutput);
  if (sampled.length === 0) return tokens;
  const sums = sumDigests(outputs, sampled);
  // Digests come in batch order over the sampled requests: the i-th sampled request is the i-th with `sample`.
  let i = 0;
  for (let k = 0; k < batch.length; k++) {
    const req = batch[k];
    if (!req.sample) continue;
    tokens[k] = sampleToken(sums[i++], req.seed, req.startPosition + req.tokens.length, vocabSize);
  }
  return tokens;
}
