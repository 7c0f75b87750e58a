import { MultiturnWorkload } from '../workload/multiturn.js';
import { loadTrace } from '../workload/trace.js';
import { TraceWorkload } from '../workload/trace-workload.js';
import type { Workload } from '../workload/workload.js';
import type { RunWorkloadConfig } from './run-config.js';

export interface RunWorkloadContext {
  /** The model's vocabulary: token ids are drawn from [0, vocabSize). */
  readonly vocabSize: number;
  /** The engine's length limit, if set: multiturn conversations end before exceeding it. */
  readonly maxModelLen: number | null;
}

/**
 * The workload a run's configuration asks for (loads and checks the trace
 * slice). Workloads are single-use: --compare creates one per run.
 */
export async function createRunWorkload(config: RunWorkloadConfig, context: RunWorkloadContext): Promise<Workload> {
  if (config.kind === 'multiturn') {
    return new MultiturnWorkload({
      requests: config.requests,
      rounds: config.rounds,
      seed: config.seed,
      vocabSize: context.vocabSize,
      maxContextTokens: context.maxModelLen,
    });
  }
  const trace = await loadTrace(config.file, {
    timeWindow: config.timeWindow,
    maxRequests: config.maxRequests,
    tokenScale: config.tokenScale,
  });
  return new TraceWorkload(trace, { vocabSize: context.vocabSize, speedup: config.speedup, arrivals: config.arrivals });
}
