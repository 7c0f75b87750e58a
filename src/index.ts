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
export { createMetricsRegistry, type MetricsSource } from './runtime/prometheus.js';
export type { EngineGauges, MonitoringSnapshot } from './metrics/gauges.js';
export type { EngineLogger } from './log/engine-events.js';
export { ConfigError, EngineError, KvtierError, RankError, RequestError, TraceError } from './core/errors.js';
export { ERROR_CODES, type ErrorCode } from './core/error-codes.js';
export { DeviceError } from './device/errors.js';
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
