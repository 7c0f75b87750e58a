import type { BackendName, CopyMethod, KvLayout } from '../device/types.js';
import type { ModelShape } from '../model/shape.js';
import type { EvictionPolicyName } from '../offload/eviction-policy-names.js';
import type { StorePolicyName } from '../offload/policies/store-policy-name.js';
import type { FinishReason } from '../scheduler/request.js';

/**
 * The library API's types: what an embedding service or the CLI hands the
 * engine and gets back.
 */

export type { EvictionPolicyName, FinishReason, StorePolicyName };
export type FailurePolicy = 'recompute' | 'fail';

/** Engine configuration before defaults are applied (validated by zod, errors name the field). */
import type { RemoteTierMetrics } from '../remote/remote-stats.js';

export interface EngineConfigInput {
  /** A preset name (src/model/presets.ts) or a full shape. Default 'tiny'. */
  model?: string | ModelShape;
  tp?: number;
  backend?: 'auto' | BackendName;
  layout?: KvLayout;
  blockSize?: number;
  /** GPU KV blocks per rank (each rank holds its heads of every block). */
  gpuBlocks?: number;
  /** Offloading: off when `offload` is false or neither cpuBlocks nor cpuBytes is given. */
  offload?: boolean;
  cpuBlocks?: number;
  /** Total CPU tier bytes over all ranks. */
  cpuBytes?: number;
  offloadFactor?: number;
  eviction?: EvictionPolicyName;
  storePolicy?: StorePolicyName;
  maxNumBatchedTokens?: number;
  maxNumSeqs?: number;
  maxModelLen?: number;
  enableChunkedPrefill?: boolean;
  enablePrefixCaching?: boolean;
  failurePolicy?: FailurePolicy;
  /** Fault plan string (see src/faults/plan.ts) and its seed. */
  faults?: string;
  faultSeed?: number;
  rankRestart?: boolean;
  stepDeadlineMs?: number;
  /** Time a rank may take to open its device, at start and when restarted (default 120000 ms). */
  startDeadlineMs?: number;
  /** Override the model's compute emulation (ns per token, whole model). */
  computeNsPerToken?: number;
  /** How transfer jobs move blocks on the CUDA backend (default auto; the host backend always uses memcpy). */
  copyMethod?: CopyMethod;
  /** A remote tier behind the CPU tier: redis://[user:pass@]host:port or rediss://... (a Redis/Valkey server or cluster). */
  remote?: string;
  /** When blocks are written to the remote: write-through (after each CPU-tier store, default) or write-back (when the CPU tier evicts them). */
  remotePolicy?: 'write-through' | 'write-back';
  /** Bound on every remote command; a lookup that takes longer is a miss (default 250). */
  remoteTimeoutMs?: number;
  /** Name that engines sharing blocks agree on (default: the model's name). */
  remoteNamespace?: string;
}

export interface RequestSpec {
  /** Optional caller id (must be unique among live requests); generated when absent. */
  readonly id?: string;
  readonly promptTokens: ArrayLike<number>;
  readonly maxTokens: number;
  readonly seed?: number;
  readonly stopToken?: number | null;
  readonly cacheSalt?: string | null;
  /**
   * When the request arrived, on the engine clock (ms); default: when it is
   * added. A caller that queues requests itself passes their real arrival so
   * TTFT includes the time they waited.
   */
  readonly arrivalMs?: number;
}

export interface FinishedRequest {
  readonly id: string;
  readonly promptTokens: Int32Array;
  readonly outputTokens: readonly number[];
  readonly maxTokens: number;
  readonly seed: number;
  readonly stopToken: number | null;
  readonly finishReason: FinishReason;
  readonly errorMessage: string | null;
  /** Engine clock (ms since engine start). */
  readonly arrivalMs: number;
  readonly firstTokenMs: number | null;
  readonly finishMs: number;
  readonly numPreemptions: number;
  /** Prompt tokens served from the GPU prefix cache / the CPU tier at first schedule. */
  readonly gpuPrefixHitTokens: number;
  readonly cpuTierHitTokens: number;
}

export interface TransferCounters {
  jobs: number;
  failedJobs: number;
  bytes: number;
  /** Sum of job device time (ms). */
  busyMs: number;
}

export interface EngineMetrics {
  steps: number;
  preemptions: number;
  requests: { added: number; finished: number; aborted: number; failed: number };
  tokens: { prompt: number; output: number; prefillComputed: number };
  /**
   * Tokens served from a cache tier instead of computed, counted at every
   * admission: a preempted request that resumes from the cache counts again
   * (the per-request figures of FinishedRequest count its first admission).
   */
  hits: { gpuPrefixTokens: number; cpuTierTokens: number };
  /** The remote tier's counters; absent without one. */
  remote?: RemoteTierMetrics;
  transfers: { gpuToCpu: TransferCounters; cpuToGpu: TransferCounters };
  loadFailures: { blocks: number; requestsRecovered: number };
  storeFailures: number;
  rankRestarts: number;
  /** Blocks still referenced / CPU blocks still in flight (should be 0 once idle). */
  leaks: { gpuBlocks: number; cpuBlocks: number };
}

export interface StepReport {
  readonly step: number;
  /** Requests that finished in this step. */
  readonly finished: readonly FinishedRequest[];
  /** Tokens appended this step, per request. */
  readonly newTokens: ReadonlyMap<string, readonly number[]>;
}
