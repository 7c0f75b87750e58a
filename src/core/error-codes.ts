/**
 * Every error code kvtier throws, in one table. A code is part of the public
 * API (callers branch on it instead of parsing messages): never rename one.
 */
export const ERROR_CODES = {
  /** A served request ended before it finished (its signal, a drain deadline, or close). */
  aborted: 'ERR_KVTIER_ABORTED',
  /** The installed package is incomplete (a compiled file or package.json is missing). */
  build: 'ERR_KVTIER_BUILD',
  /** A setting is missing, malformed or inconsistent. */
  config: 'ERR_KVTIER_CONFIG',
  /** The CPU tier's block allocator was used against its contract. */
  cpuAllocator: 'ERR_KVTIER_CPU_ALLOCATOR',
  /** The device (native addon) refused a call or failed. */
  device: 'ERR_KVTIER_DEVICE',
  /** The server is draining and takes no new requests. */
  draining: 'ERR_KVTIER_DRAINING',
  /** The engine failed and can no longer serve requests. */
  engine: 'ERR_KVTIER_ENGINE',
  /** The HTTP front-end thread of `kvtier serve` died or failed to start. */
  frontendThread: 'ERR_KVTIER_FRONTEND_THREAD',
  /** A fault plan does not parse or does not fit the engine. */
  faultPlan: 'ERR_KVTIER_FAULT_PLAN',
  /** An HTTP request to `kvtier serve` was refused (the body carries the OpenAI-style code). */
  http: 'ERR_KVTIER_HTTP',
  /** A KV event stream's reader fell too far behind. */
  kvEventsOverflow: 'ERR_KVTIER_KV_EVENTS_OVERFLOW',
  /** The KV event publisher's settings or sockets failed. */
  kvEventsPublisher: 'ERR_KVTIER_KV_EVENTS_PUBLISHER',
  /** The scheduler side of the offloading connector was used against its contract. */
  offloadConnector: 'ERR_KVTIER_OFFLOAD_CONNECTOR',
  /** The CPU tier's manager was used against its contract. */
  offloadManager: 'ERR_KVTIER_OFFLOAD_MANAGER',
  /** A report or output file could not be written. */
  output: 'ERR_KVTIER_OUTPUT',
  /** The serving engine's waiting queue is full. */
  queueFull: 'ERR_KVTIER_QUEUE_FULL',
  /** A rank died, threw, or missed its deadline. */
  rank: 'ERR_KVTIER_RANK',
  /** A remote tier setting is malformed. */
  remoteConfig: 'ERR_KVTIER_REMOTE_CONFIG',
  /** One remote tier command failed (missed, timed out, lost its connection...). */
  remoteOperation: 'ERR_KVTIER_REMOTE_OPERATION',
  /** The remote server could not be reached at start. */
  remoteUnavailable: 'ERR_KVTIER_REMOTE_UNAVAILABLE',
  /** A remote value failed validation. */
  remoteValue: 'ERR_KVTIER_REMOTE_VALUE',
  /** A request was refused before it was accepted. */
  request: 'ERR_KVTIER_REQUEST',
  /** The serving engine is closed. */
  servingClosed: 'ERR_KVTIER_SERVING_CLOSED',
  /** A store policy was wired to a manager that cannot drive it. */
  storePolicy: 'ERR_KVTIER_STORE_POLICY',
  /** A sweep's verification run disagreed with its figures. */
  sweepVerify: 'ERR_KVTIER_SWEEP_VERIFY',
  /** A trace file line does not parse. */
  trace: 'ERR_KVTIER_TRACE',
  /** The command line is malformed. */
  usage: 'ERR_KVTIER_USAGE',
} as const;

export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];
