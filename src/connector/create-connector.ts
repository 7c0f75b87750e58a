import type { EvictionPolicyName } from '../offload/eviction-policy-names.js';
import { OffloadingConnector } from './scheduler-connector.js';
import { createOffloadingManager } from '../offload/create-manager.js';
import { cpuTierGeometry, type CpuTierGeometry, type CpuTierGeometryInput } from '../offload/geometry.js';
import type { OffloadingManager } from '../offload/manager.js';
import { StoreOnComputePolicy } from '../offload/policies/on-compute.js';
import { StoreOnEvictPolicy } from '../offload/policies/on-evict.js';
import { createReusePolicy } from '../offload/policies/reuse.js';
import { parseStorePolicyName } from '../offload/policies/store-policy-name.js';
import { offloadGeometry, type StorePolicy } from '../offload/policies/store-policy.js';

/** Engine-level offloading options; errors name the field and value. */
export interface OffloadingConnectorConfig extends CpuTierGeometryInput {
  readonly eviction: EvictionPolicyName;
  /** 'on-compute' | 'on-evict' | 'reuse:K'. */
  readonly storePolicy: string;
  /** Record the manager's stored/removed events (default false). */
  readonly enableEvents?: boolean;
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
 * them. 'reuse:K' is store-on-compute through a manager wrapped in a reuse
 * filter of threshold K. The 'on-evict' policy with offloadFactor > 1 also
 * needs `connector.attachGpuPrefixCache(scheduler.kvCacheManager.pool)`
 * once the scheduler exists.
 */
export function createOffloadingConnector(config: OffloadingConnectorConfig): OffloadingSetup {
  const policySpec = parseStorePolicyName(config.storePolicy);
  const geometry = cpuTierGeometry({
    model: config.model,
    tp: config.tp,
    blockSize: config.blockSize,
    offloadFactor: config.offloadFactor,
    cpuBlocks: config.cpuBlocks,
    cpuBytes: config.cpuBytes,
  });
  const tierManager = createOffloadingManager({
    eviction: config.eviction,
    capacityBlocks: geometry.capacityBlocks,
    reuseThreshold: policySpec.kind === 'reuse' ? policySpec.threshold : undefined,
    enableEvents: config.enableEvents,
  });
  const manager = config.wrapManager ? config.wrapManager(tierManager) : tierManager;
  const blocks = offloadGeometry(config.blockSize, config.offloadFactor);
  let policy: StorePolicy;
  if (policySpec.kind === 'on-compute') policy = new StoreOnComputePolicy(blocks);
  else if (policySpec.kind === 'on-evict') policy = new StoreOnEvictPolicy(blocks);
  else policy = createReusePolicy(blocks, policySpec.threshold);
  const connector = new OffloadingConnector({
    manager,
    policy,
    geometry: blocks,
    bytesPerGpuBlock: geometry.bytesPerGpuBlockPerRank * config.tp,
  });
  return { connector, manager, geometry };
}
