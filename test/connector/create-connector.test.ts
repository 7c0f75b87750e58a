import { describe, expect, it } from 'vitest';
import type { BlockHash } from '../../src/core/block-hash.js';
import { ConfigError } from '../../src/core/errors.js';
import { kvGeometry } from '../../src/core/kv-geometry.js';
import { ForwardingManager } from '../../src/offload/forwarding-manager.js';
import { bytesPerGpuBlock } from '../../src/model/shape.js';
import { ArcEvictionPolicy } from '../../src/offload/arc-manager.js';
import type { CpuOffloadingManager } from '../../src/offload/cpu-offloading-manager.js';
import { createOffloadingConnector, type OffloadingConnectorConfig } from '../../src/connector/create-connector.js';
import { LruEvictionPolicy } from '../../src/offload/lru-manager.js';
import { StoreOnComputePolicy } from '../../src/offload/store-policies/on-compute.js';
import { StoreOnEvictPolicy } from '../../src/offload/store-policies/on-evict.js';
import { ReuseFilterManager } from '../../src/offload/reuse-filter-manager.js';
import { bareRequest, promptOf, TINY } from './helpers.js';

/** A tier over TINY at tp 2 with blocks of 4 tokens; `offloadFactor` goes into the geometry. */
function config({ offloadFactor = 1, ...overrides }: Partial<Omit<OffloadingConnectorConfig, 'geometry'>> & { offloadFactor?: number } = {}): OffloadingConnectorConfig {
  const geometry = kvGeometry({ model: TINY, tp: 2, blockSize: 4, offloadFactor });
  return { geometry, cpuBlocks: 16, eviction: 'lru', storePolicy: 'on-compute', ...overrides };
}

describe('createOffloadingConnector', () => {
  it('builds an LRU or ARC manager of the configured capacity under a store-on-compute policy by default', () => {
    const lru = createOffloadingConnector(config());
    expect((lru.manager as CpuOffloadingManager).policy).toBeInstanceOf(LruEvictionPolicy);
    expect(lru.connector.policy.name).toBe('on-compute');
    expect(lru.manager.stats().capacityBlocks).toBe(16);
    expect((createOffloadingConnector(config({ eviction: 'arc' })).manager as CpuOffloadingManager).policy).toBeInstanceOf(ArcEvictionPolicy);
  });

  it('builds reuse:K as the on-compute policy over the configured manager wrapped in a reuse filter of threshold K', () => {
    const { manager, connector } = createOffloadingConnector(config({ storePolicy: 'reuse:3', eviction: 'arc' }));
    expect(manager).toBeInstanceOf(ReuseFilterManager);
    expect((manager as ReuseFilterManager).threshold).toBe(3);
    expect(connector.policy).toBeInstanceOf(StoreOnComputePolicy);
    expect(connector.policy.name).toBe('on-compute');
  });

  it('builds the write-back policy for on-evict', () => {
    expect(createOffloadingConnector(config({ storePolicy: 'on-evict' })).connector.policy).toBeInstanceOf(StoreOnEvictPolicy);
  });

  it('sizes the tier from cpuBytes and counts the bytes of issued jobs over every rank', () => {
    const perGpuBlockAllRanks = bytesPerGpuBlock(TINY, 2, 4) * 2;
    const { connector, geometry } = createOffloadingConnector(
      config({ cpuBlocks: undefined, cpuBytes: 10 * 2 * perGpuBlockAllRanks + 5, offloadFactor: 2 }),
    );
    expect(geometry.capacityBlocks).toBe(10);
    const request = bareRequest('r', promptOf(8, 1), 4);
    request.numComputedTokens = 8;
    connector.buildConnectorMeta({
      step: 0,
      scheduled: [{ request, blockIds: [0, 1], numScheduledTokens: 8, fresh: true }],
      preemptedReqIds: [],
    });
    expect(connector.metrics().bytesExpected.gpuToCpu).toBe(2 * perGpuBlockAllRanks);
  });

  it('rejects a store policy it does not know, naming the field and value', () => {
    for (const storePolicy of ['sometimes', 'reuse:0', 'reuse:', 'reuse:1.5']) {
      expect(() => createOffloadingConnector(config({ storePolicy }))).toThrow(ConfigError);
      expect(() => createOffloadingConnector(config({ storePolicy }))).toThrow(`storePolicy must be`);
      expect(() => createOffloadingConnector(config({ storePolicy }))).toThrow(JSON.stringify(storePolicy));
    }
  });

  it('rejects a tier of no blocks and a bad offload factor', () => {
    expect(() => createOffloadingConnector(config({ cpuBlocks: 0 }))).toThrow(/cpuBlocks/);
    expect(() => createOffloadingConnector(config({ offloadFactor: 0 }))).toThrow(/offloadFactor/);
    expect(() => createOffloadingConnector(config({ cpuBlocks: undefined }))).toThrow(/cpuBlocks and cpuBytes/);
  });
});

describe('queue protection keys', () => {
  /** How many times the connector hands a queued request's keys to its manager. */
  function protectCalls(eviction: OffloadingConnectorConfig['eviction'], storePolicy = 'on-compute'): number {
    let calls = 0;
    const { connector } = createOffloadingConnector(
      config({
        eviction,
        storePolicy,
        wrapManager: (inner) =>
          new (class extends ForwardingManager {
            override protect(owner: string, keys: readonly BlockHash[], front?: boolean): void {
              calls++;
              super.protect(owner, keys, front);
            }
          })(inner),
      }),
    );
    connector.requestQueued(bareRequest('queued', promptOf(16, 5), 4));
    return calls;
  }

  it("hands a queued request's keys to a manager that protects them, and builds none for one that does not", () => {
    expect(protectCalls('s3fifo+queue')).toBe(1);
    expect(protectCalls('lru+queue')).toBe(1);
    expect(protectCalls('lru')).toBe(0);
    expect(protectCalls('s3fifo')).toBe(0);
    expect(protectCalls('lru', 'reuse:2')).toBe(0);
    expect(protectCalls('s3fifo+queue', 'reuse:2')).toBe(1);
  });
});
