import { MultiturnWorkload } from '../workload/multiturn.js';
import { loadTrace, type Trace } from '../workload/trace.js';
import { TraceWorkload } from '../workload/trace-workload.js';
import type { Workload } from '../workload/workload.js';
import type { RunWorkloadConfig, TraceRunWorkload } from './run-config.js';
import { UsageError } from './usage-error.js';

export interface RunWorkloadContext {
  /** The model's vocabulary: token ids are drawn from [0, vocabSize). */
  readonly vocabSize: number;
  /**
   * The engine's length limit (prompt plus output), if known: multiturn
   * conversations end before exceeding it, and a trace request over it is
   * rejected before the run starts.
   */
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
  checkTraceSlice(trace, config, context.maxModelLen);
  return new TraceWorkload(trace, { vocabSize: context.vocabSize, speedup: config.speedup, arrivals: config.arrivals });
}

/**
 * A replay that would stop at its first oversized request, or one with
 * nothing to replay, is bad input: say so before any rank starts.
 */
function checkTraceSlice(trace: Trace, config: TraceRunWorkload, maxModelLen: number | null): void {
  if (trace.records.length === 0) {
    const window = config.timeWindow === null ? '' : ` in --time-window ${config.timeWindow[0]}:${config.timeWindow[1] === Infinity ? '' : config.timeWindow[1]}`;
    throw new UsageError(`${trace.file}: no requests to replay${window}`);
  }
  if (maxModelLen === null) return;
  const tooLong = trace.records.find((r) => r.inputLength + r.outputLength > maxModelLen);
  if (tooLong === undefined) return;
  const scaled = trace.tokenScale === 1 ? '' : ` after --token-scale ${trace.tokenScale}`;
  throw new UsageError(
    `${trace.file}:${tooLong.line}: input_length + output_length is ${tooLong.inputLength + tooLong.outputLength} tokens${scaled}, ` +
      `over the engine's limit of ${maxModelLen} (raise --gpu-blocks or --max-model-len, or replay with a larger --token-scale)`,
  );
}
