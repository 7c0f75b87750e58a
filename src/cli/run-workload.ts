import { MultiturnWorkload } from '../workload/multiturn.js';
import { loadTrace, type Trace } from '../workload/trace.js';
import { checkArrivalSpan, TraceWorkload } from '../workload/trace-workload.js';
import { ConfigError } from '../core/errors.js';
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
    const workload = new MultiturnWorkload({
      requests: config.requests,
      rounds: config.rounds,
      seed: config.seed,
      vocabSize: context.vocabSize,
      maxContextTokens: context.maxModelLen,
    });
    // Every first round was too long for the engine: the run would serve nothing and look like a success.
    if (workload.nextArrivalMs() === null) {
      throw new UsageError(
        `no multiturn request fits the engine's limit of ${context.maxModelLen ?? 0} tokens (prompt plus output): ` +
          'raise --max-model-len, or --gpu-blocks or --block-size (the GPU KV cache bounds it)',
      );
    }
    return workload;
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
  checkArrivalSpanOfRun(trace, config);
  if (maxModelLen === null) return;
  const tooLong = trace.records.find((r) => r.inputLength + r.outputLength > maxModelLen);
  if (tooLong === undefined) return;
  const scaled = trace.tokenScale === 1 ? '' : ` after --token-scale ${trace.tokenScale}`;
  throw new UsageError(
    `${trace.file}:${tooLong.line}: input_length + output_length is ${tooLong.inputLength + tooLong.outputLength} tokens${scaled}, ` +
      `over the engine's limit of ${maxModelLen} (raise --gpu-blocks or --max-model-len, or replay with a larger --token-scale)`,
  );
}

function checkArrivalSpanOfRun(trace: Trace, config: TraceRunWorkload): void {
  if (!config.arrivals) return;
  try {
    checkArrivalSpan(trace, config.speedup, 'raise --speedup or replay with --no-arrivals');
  } catch (error) {
    throw error instanceof ConfigError ? new UsageError(error.message) : error;
  }
}
