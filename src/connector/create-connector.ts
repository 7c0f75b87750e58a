import type { EvictionPolicyName } from '../config/eviction-policy-names.js';
import { OffloadingConnector } from './scheduler-connector.js';
import { createOffloadingManager } from '../offload/create-manager.js';
import type { KvGeometry } from '../core/kv-geometry.js';
import { cpuTierGeometry, type CpuTierCapacity, type CpuTierGeometry } from '../offload/geometry.js';
import type { OffloadingManager } from '../offload/manager.js';
import { StoreOnComputePolicy } from '../offload/store-policies/on-compute.js';
import { StoreOnEvictPolicy } from '../offload/store-policies/on-evict.js';
import { parseStorePolicyName } from '../config/store-policy-name.js';
import type { StorePolicy } from '../offload/store-policies/store-policy.js';

/** Engine-level offloading options; errors name the field and value. */
export interface OffloadingConnectorConfig extends CpuTierCapacity {
  readonly geometry: KvGeometry;
  readonly eviction: EvictionPolicyName;
  /** 'on-compute' | 'on-evict' | 'reuse:K' (on-compute behind a reuse filter of threshold K). */
  readonly storePolicy: string;
  /** Wraps the manager the connector uses (the remote tier observes stores and evictions through it). */
  readonly wrapManager?: (manager: OffloadingManager) => OffloadingManager;
}

export interface OffloadingSetup {
  readonly connector: OffloadingConnector;
  readonly manager: OffloadingManager;
  readonly geometry: CpuTierGeometry;
}

/**
 * Builds the CPU tier's manager, the store policy and the connector over
 * them. 'reuse:K' is the on-compute policy over a manager wrapped in a reuse
 * filter of threshold K (see store-policy-name.ts). The 'on-evict' policy with offloadFactor > 1 also
 * needs `connector.attachGpuPrefixCache(scheduler.kvCacheManager.pool)`
 * once the scheduler exists.
 */
export function createOffloadingConnector(config: OffloadingConnectorConfig): OffloadingSetup {
  const policySpec = parseStorePolicyName(config.storePolicy);
  const geometry = cpuTierGeometry(config.geometry, { cpuBlocks: config.cpuBlocks, cpuBytes: config.cpuBytes });
  const tierManager = createOffloadingManager({
    eviction: config.eviction,
    capacityBlocks: geometry.capacityBlocks,
    reuseThreshold: policySpec.kind === 'on-compute' ? (policySpec.reuseThreshold ?? undefined) : undefined,
  });
  const manager = config.wrapManager ? config.wrapManager(tierManager) : tierManager;
  const policy: StorePolicy = policySpec.kind === 'on-evict' ? new StoreOnEvictPolicy(geometry) : new StoreOnComputePolicy(geometry);
  const connector = new OffloadingConnector({
    manager,
    policy,
    geometry,
    bytesPerGpuBlock: geometry.bytesPerGpuBlockPerRank * geometry.tp,
  });
  return { connector, manager, geometry };
}
