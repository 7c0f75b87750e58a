import { ConfigError } from '../core/errors.js';
import type { EvictionPolicyName } from '../config/eviction-policy-names.js';
import { arcManager } from './arc-manager.js';
import { classHoldManager } from './class-hold-manager.js';
import { EVICTION_POLICY_NAMES, QUEUE_PROTECTION_SUFFIX } from '../config/eviction-policy-names.js';
import { hitDensityManager } from './hit-density-manager.js';
import { HoldOffloadingManager } from './hold-manager.js';
import { lruManager } from './lru-manager.js';
import type { OffloadingManager } from './manager.js';
import { ReuseFilterManager } from './reuse-filter-manager.js';
import { s3FifoManager } from './s3fifo-manager.js';

export interface OffloadingManagerConfig {
  readonly eviction: EvictionPolicyName;
  /** Offloaded blocks the CPU tier holds (cpuTierGeometry(...).capacityBlocks). */
  readonly capacityBlocks: number;
  /** When set, store only blocks whose key lookups saw at least this many times. */
  readonly reuseThreshold?: number;
  /** Keys the reuse filter remembers; default max(65536, 4 x capacityBlocks). */
  readonly reuseTrackerSize?: number;
}

/**
 * The tracker must remember keys for longer than the tier holds blocks, or a
 * block would be forgotten before it could come back; a few times the
 * capacity, with a floor for small tiers.
 */
const MIN_DEFAULT_TRACKER_SIZE = 65_536;
const TRACKER_SIZE_PER_CAPACITY_BLOCK = 4;

function unknownEviction(eviction: unknown): never {
  throw new ConfigError(`eviction must be one of ${EVICTION_POLICY_NAMES.join(', ')}, got ${JSON.stringify(eviction)}`);
}

/** Builds the manager a config asks for; errors name the field and value. */
export function createOffloadingManager(config: OffloadingManagerConfig): OffloadingManager {
  const { eviction, capacityBlocks, reuseThreshold, reuseTrackerSize } = config;
  if (!Number.isSafeInteger(capacityBlocks) || capacityBlocks < 1) {
    throw new ConfigError(`capacityBlocks must be an integer >= 1, got ${String(capacityBlocks)}`);
  }
  const protectQueued = typeof eviction === 'string' && eviction.endsWith(QUEUE_PROTECTION_SUFFIX);
  const order = protectQueued ? eviction.slice(0, -QUEUE_PROTECTION_SUFFIX.length) : eviction;
  const options = { capacityBlocks, protectQueued };
  let manager: OffloadingManager;
  if (!(EVICTION_POLICY_NAMES as readonly string[]).includes(eviction)) manager = unknownEviction(eviction);
  else if (order === 'lru') manager = lruManager(options);
  else if (order === 'arc') manager = arcManager(options);
  else if (order === 'lhd') manager = hitDensityManager(options);
  else if (order === 's3fifo') manager = s3FifoManager(options);
  else if (order === 'hold') manager = new HoldOffloadingManager(options);
  else if (order === 'classhold') manager = classHoldManager(options);
  else manager = unknownEviction(eviction);

  if (reuseThreshold === undefined) {
    if (reuseTrackerSize !== undefined) {
      throw new ConfigError(`reuseTrackerSize (${String(reuseTrackerSize)}) needs reuseThreshold to be set`);
    }
    return manager;
  }
  if (!Number.isSafeInteger(reuseThreshold) || reuseThreshold < 1) {
    throw new ConfigError(`reuseThreshold must be an integer >= 1, got ${String(reuseThreshold)}`);
  }
  if (reuseTrackerSize !== undefined && (!Number.isSafeInteger(reuseTrackerSize) || reuseTrackerSize < 1)) {
    throw new ConfigError(`reuseTrackerSize must be an integer >= 1, got ${String(reuseTrackerSize)}`);
  }
  return new ReuseFilterManager(manager, {
    threshold: reuseThreshold,
    maxTrackerSize:
      reuseTrackerSize ?? Math.max(MIN_DEFAULT_TRACKER_SIZE, TRACKER_SIZE_PER_CAPACITY_BLOCK * capacityBlocks),
  });
}
