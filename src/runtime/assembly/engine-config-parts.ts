import { kvGeometry, type KvGeometry } from '../../core/kv-geometry.js';
import type { BackendName } from '../../device/types.js';
import type { FaultPlan } from '../../faults/plan.js';
import { parseSchedulerConfig } from '../../scheduler/config.js';
import type { HostLinkProfile } from '../../timing/gpu-profiles.js';
import type { EngineConfig } from '../engine-config.js';
import type { AssemblyConfig } from './assemble-engine.js';

/** The engine's KV geometry: resolved once from its config, passed whole to every part. */
export function engineGeometry(config: EngineConfig): KvGeometry {
  return kvGeometry({
    model: config.model,
    tp: config.tp,
    blockSize: config.blockSize,
    offloadFactor: config.offloadFactor,
    layout: config.layout,
  });
}

/**
 * What the assembly builds an engine from, read off its resolved config.
 * `hostLink`: on the host backend, the GPU profile's link (transfers take as
 * long as it would).
 */
export function engineAssemblyConfig(config: EngineConfig, backend: BackendName, faults: FaultPlan, hostLink: HostLinkProfile | null): AssemblyConfig {
  return {
    scheduler: parseSchedulerConfig({
      blockSize: config.blockSize,
      numGpuBlocks: config.gpuBlocks,
      maxNumBatchedTokens: config.maxNumBatchedTokens,
      maxNumSeqs: config.maxNumSeqs,
      maxModelLen: config.maxModelLen,
      enableChunkedPrefill: config.enableChunkedPrefill,
      enablePrefixCaching: config.enablePrefixCaching,
      failurePolicy: config.failurePolicy,
      vocabSize: config.model.vocabSize,
    }),
    cpuTier: config.offload
      ? { cpuBlocks: config.cpuBlocks, cpuBytes: config.cpuBytes, eviction: config.eviction, storePolicy: config.storePolicy }
      : null,
    remote: config.remote,
    faults,
    device: { backend, copyMethod: config.copyMethod, ...(hostLink === null ? {} : { hostLink }) },
  };
}
