import { replay, type PolicyConfiguration, type PolicyResult, type ReplayOptions, type ReplaySlice } from './policies.js';
import { TierStreamRecorder, type TierStream } from './tier-stream.js';

/**
 * Simulated replays that record the stream the CPU tier sees behind the GPU
 * tier (tier-stream.ts).
 */

/** One configuration's replay, and the stream its tier saw. */
export interface RecordedReplay {
  readonly result: PolicyResult;
  readonly stream: TierStream;
}

/**
 * Replays the slice through `configuration` as `replay` does; with
 * `servesHits` false the tier answers every lookup with no hit (the stream a
 * policy-free tier sees).
 */
export async function replayRecordingTierStream(
  slice: ReplaySlice,
  options: ReplayOptions,
  configuration: PolicyConfiguration,
  servesHits = true,
): Promise<RecordedReplay> {
  let recorder: TierStreamRecorder | null = null;
  const result = await replay(options, slice.requests, slice.expected, configuration, slice.positionSums, (built) => {
    recorder = new TierStreamRecorder({ manager: built.manager, policy: built.policy, geometry: built.geometry, servesHits });
    return recorder;
  });
  const recorded = recorder as TierStreamRecorder | null;
  if (recorded === null) throw new Error('the replay built no connector to record');
  return { result, stream: recorded.stream() };
}

/**
 * The stream a tier that never hits sees: store on compute, every block past
 * a GPU hit computed and offered. The tier has room for every block the
 * slice can compute, so no store is refused and the replay's timing depends
 * on no capacity.
 */
export async function recordTierStream(slice: ReplaySlice, options: Omit<ReplayOptions, 'cpuBlocks'>): Promise<TierStream> {
  const blockTokens = options.geometry.offloadedBlockTokens;
  let cpuBlocks = 1;
  for (const r of slice.requests) cpuBlocks += Math.floor((r.prompt.length + r.maxTokens) / blockTokens);
  return (await replayRecordingTierStream(slice, { ...options, cpuBlocks }, { eviction: 'lru', storePolicy: 'on-compute' }, false)).stream;
}
