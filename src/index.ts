/**
 * kvtier as a library: create an engine from one config, add requests, step
 * or run them, abort, read metrics, shut down.
 */
export { Engine, EngineStoppedError, type EngineOptions } from './runtime/engine.js';
export type {
  EngineConfigInput,
  EngineMetrics,
  EvictionPolicyName,
  FailurePolicy,
  FinishedRequest,
  FinishReason,
  RequestSpec,
  StepReport,
  StorePolicyName,
  TransferCounters,
} from './runtime/engine-types.js';
export { resolveEngineConfig, type EngineConfig } from './runtime/engine-config.js';
export { createMetricsRegistry, type MetricsSource } from './prometheus/metrics-registry.js';
export type { EngineGauges, MonitoringSnapshot } from './metrics/gauges.js';
export type { EngineLogger } from './log/engine-events.js';
export type {
  AllBlocksClearedEvent,
  BlockRemovedEvent,
  BlockStoredEvent,
  KvCacheEvent,
  KvEventBatch,
  KvEventCollector,
  KvMedium,
  BlockTokenSource,
  TierEventSink,
} from './events/kv-cache-events.js';
export { KvEventStream, KvEventOverflowError, type KvEventStreamOptions } from './events/kv-event-stream.js';
export { KvEventPublisher, KvEventPublisherError, type KvEventPublisherOptions } from './events/kv-event-publisher.js';
export { KvEventThread, type KvEventCollectorHost, type KvEventThreadOptions } from './events/kv-event-thread.js';
export { eventBlockHash, KvEventWireEncoder, type KvEventEncoding } from './events/vllm-wire.js';
export { ConfigError, EngineError, KvtierError, RankError, RequestError, TraceError } from './core/errors.js';
export { ERROR_CODES, type ErrorCode } from './core/error-codes.js';
export { DeviceError } from './device/errors.js';
export { BLOCK_HASH_KEY_ENV, blockHashes, setBlockHashKey, type BlockHash, type BlockHashKey } from './core/block-hash.js';
export { OffloadingConnectorError } from './connector/scheduler-connector.js';
export { CpuBlockAllocatorError } from './offload/cpu-block-allocator.js';
export { OffloadingManagerError } from './offload/manager.js';
export { StorePolicyWiringError } from './offload/store-policies/on-evict.js';
export {
  RemoteConfigError,
  RemoteOperationError,
  RemoteUnavailableError,
  RemoteValueError,
  type RemoteFailureKind,
  type RemoteValueFault,
} from './remote/errors.js';
export { availableBackends, cudaDeviceCount } from './device/native.js';
export type { BackendName, CopyMethod, KvLayout } from './device/types.js';
export { FaultPlanError, parseFaultPlan, type FaultPlan, type FaultRule } from './faults/plan.js';
export { MODEL_PRESET_NAMES, MODEL_PRESETS, type ModelPresetName } from './model/presets.js';
export type { ModelShape } from './model/shape.js';
export { referenceGenerate, type ReferenceRequest, type ReferenceResult } from './model/reference.js';
export {
  ServingEngine,
  DEFAULT_MAX_WAITING,
  type DrainOutcome,
  type RequestSource,
  type ServingOptions,
  type SubmitOptions,
} from './serve/serving-engine.js';
export { RequestStream, type TokenSink } from './serve/request-stream.js';
export type { RequestEndSink, StepTokenSink } from './serve/step-token-sink.js';
export { FrontendThreadError, QueueFullError, RequestAbortedError, ServingClosedError } from './serve/errors.js';
export { startServer, DEFAULT_SERVE_HOST, DEFAULT_SERVE_PORT, type RunningServer, type ServeOptions } from './serve/serve-app.js';
export type { HttpFrontEnd } from './serve/http-front-end.js';
export { textCodecFor, type TextCodec } from './serve/text-codec.js';
