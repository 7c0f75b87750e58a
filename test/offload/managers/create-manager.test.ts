import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/core/errors.js';
import { ArcEvictionPolicy } from '../../../src/offload/arc-manager.js';
import type { CpuOffloadingManager } from '../../../src/offload/cpu-offloading-manager.js';
import { createOffloadingManager, type OffloadingManagerConfig } from '../../../src/offload/create-manager.js';
import { LruEvictionPolicy } from '../../../src/offload/lru-manager.js';
import { ReuseFilterManager } from '../../../src/offload/reuse-filter-manager.js';
import { keys, storeReady } from './helpers.js';

function configError(config: Partial<OffloadingManagerConfig> & Record<string, unknown>): string {
  try {
    createOffloadingManager({ eviction: 'lru', capacityBlocks: 4, ...config } as OffloadingManagerConfig);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`config ${JSON.stringify(config)} was accepted`);
}

describe('createOffloadingManager', () => {
  it('builds the eviction policy the config names, with the given capacity', () => {
    const lru = createOffloadingManager({ eviction: 'lru', capacityBlocks: 3 });
    const arc = createOffloadingManager({ eviction: 'arc', capacityBlocks: 5 });
    expect((lru as CpuOffloadingManager).policy).toBeInstanceOf(LruEvictionPolicy);
    expect((arc as CpuOffloadingManager).policy).toBeInstanceOf(ArcEvictionPolicy);
    expect(lru.stats().capacityBlocks).toBe(3);
    expect(arc.stats().capacityBlocks).toBe(5);
  });

  it('wraps the manager in a reuse filter when a reuse threshold is set', () => {
    const manager = createOffloadingManager({
      eviction: 'lru',
      capacityBlocks: 4,
      reuseThreshold: 2,
      reuseTrackerSize: 8,
    });
    expect(manager).toBeInstanceOf(ReuseFilterManager);
    const filter = manager as ReuseFilterManager;
    expect([filter.threshold, filter.maxTrackerSize]).toEqual([2, 8]);
    manager.lookup(keys(1));
    expect(manager.prepareStore(keys(1))?.declinedKeys).toEqual(keys(1));
  });

  it('sizes the reuse tracker to several times the capacity by default, with a floor for small tiers', () => {
    const small = createOffloadingManager({ eviction: 'lru', capacityBlocks: 4, reuseThreshold: 2 });
    const large = createOffloadingManager({ eviction: 'lru', capacityBlocks: 100_000, reuseThreshold: 2 });
    expect((small as ReuseFilterManager).maxTrackerSize).toBe(65_536);
    expect((large as ReuseFilterManager).maxTrackerSize).toBe(400_000);
  });

  it('rejects bad values with an error naming the field and value', () => {
    expect(configError({ eviction: 'fifo' as 'lru' })).toMatch(/eviction must be one of lru, arc, lhd, s3fifo, hold, classhold, lru\+queue, s3fifo\+queue, hold\+queue, classhold\+queue, got "fifo"/);
    expect(configError({ capacityBlocks: 0 })).toMatch(/capacityBlocks must be an integer >= 1, got 0/);
    expect(configError({ capacityBlocks: 2.5 })).toMatch(/capacityBlocks .* got 2.5/);
    expect(configError({ reuseThreshold: 0 })).toMatch(/reuseThreshold must be an integer >= 1, got 0/);
    expect(configError({ reuseThreshold: 2, reuseTrackerSize: -1 })).toMatch(
      /reuseTrackerSize must be an integer >= 1, got -1/,
    );
    expect(configError({ reuseTrackerSize: 10 })).toMatch(/reuseTrackerSize \(10\) needs reuseThreshold/);
  });
});
