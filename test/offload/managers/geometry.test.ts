import { describe, expect, it } from 'vitest';
import { TINY } from '../../support/tiny.js';
import { blockHashes } from '../../../src/core/block-hash.js';
import { ConfigError } from '../../../src/core/errors.js';
import { MODEL_PRESETS } from '../../../src/model/presets.js';
import type { ModelShape } from '../../../src/model/shape.js';
import { kvGeometry, type KvGeometryInput } from '../../../src/core/kv-geometry.js';
import { cpuTierGeometry, offloadKeyOf, offloadKeys, type CpuTierCapacity } from '../../../src/offload/geometry.js';

type GeometryInput = KvGeometryInput & CpuTierCapacity;

/** The tier's geometry from the KV geometry and the capacity, given as one object. */
function tierGeometry({ cpuBlocks, cpuBytes, ...kv }: GeometryInput) {
  return cpuTierGeometry(kvGeometry(kv), { cpuBlocks, cpuBytes });
}

const llama8b: ModelShape = MODEL_PRESETS['llama-8b'];

/** K and V of every layer and head of `rank`'s shard, 2 bytes per element, `tokens` positions. */
function shardBytes(model: ModelShape, tp: number, tokens: number): number {
  return model.layers * 2 * (model.kvHeads / tp) * model.headDim * 2 * tokens;
}

function geometryError(input: Partial<GeometryInput> & Record<string, unknown>): string {
  try {
    tierGeometry({ model: TINY, tp: 2, blockSize: 16, offloadFactor: 1, cpuBlocks: 8, ...input });
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`geometry ${JSON.stringify(input)} was accepted`);
}

describe('CPU tier geometry', () => {
  it('sizes an offloaded block as f GPU blocks, per rank and over all ranks', () => {
    const geometry = tierGeometry({ model: llama8b, tp: 4, blockSize: 16, offloadFactor: 4, cpuBlocks: 10 });
    const gpuBlockPerRank = shardBytes(llama8b, 4, 16);
    expect(geometry).toEqual({
      model: llama8b,
      tp: 4,
      blockSize: 16,
      offloadFactor: 4,
      layout: 'cross-layer',
      kvHeadsPerRank: llama8b.kvHeads / 4,
      elementBytes: 2,
      offloadedBlockTokens: 64,
      bytesPerGpuBlockPerRank: gpuBlockPerRank,
      bytesPerCpuBlockPerRank: 4 * gpuBlockPerRank,
      bytesPerCpuBlockAllRanks: 16 * gpuBlockPerRank,
      capacityBlocks: 10,
      cpuBytesPerRank: 40 * gpuBlockPerRank,
    });
    // An 8B-class model keeps 128 KiB of KV per token: 2 MiB per 16-token GPU block over all ranks.
    expect(4 * gpuBlockPerRank).toBe(2 * 1024 * 1024);
  });

  it('fits as many whole offloaded blocks as the total bytes over all ranks allow', () => {
    const perBlockAllRanks = shardBytes(TINY, 2, 16 * 3) * 2;
    const geometry = tierGeometry({
      model: TINY,
      tp: 2,
      blockSize: 16,
      offloadFactor: 3,
      cpuBytes: 7 * perBlockAllRanks + perBlockAllRanks - 1,
    });
    expect(geometry.bytesPerCpuBlockAllRanks).toBe(perBlockAllRanks);
    expect(geometry.capacityBlocks).toBe(7);
    expect(geometry.cpuBytesPerRank).toBe((7 * perBlockAllRanks) / 2);
  });

  it('does not depend on tp for the whole tier: more ranks hold smaller shards of the same blocks', () => {
    const one = tierGeometry({ model: TINY, tp: 1, blockSize: 16, offloadFactor: 2, cpuBytes: 1 << 20 });
    const four = tierGeometry({ model: TINY, tp: 4, blockSize: 16, offloadFactor: 2, cpuBytes: 1 << 20 });
    expect(four.capacityBlocks).toBe(one.capacityBlocks);
    expect(four.bytesPerCpuBlockPerRank * 4).toBe(one.bytesPerCpuBlockPerRank);
  });

  it('rejects bad values with an error naming the field and value', () => {
    expect(geometryError({ offloadFactor: 0 })).toMatch(/offloadFactor must be an integer >= 1, got 0/);
    expect(geometryError({ offloadFactor: 1.5 })).toMatch(/offloadFactor must be an integer >= 1, got 1.5/);
    expect(geometryError({ blockSize: 0 })).toMatch(/blockSize must be an integer >= 1, got 0/);
    expect(geometryError({ tp: 0 })).toMatch(/tp must be an integer >= 1, got 0/);
    expect(geometryError({ tp: 3 })).toMatch(/tp \(3\) must divide the model's kvHeads \(4\)/);
    expect(geometryError({ cpuBlocks: 0 })).toMatch(/cpuBlocks must be an integer >= 1, got 0/);
    expect(geometryError({ cpuBytes: 1024 })).toMatch(/exactly one of cpuBlocks and cpuBytes, got cpuBlocks=8 and cpuBytes=1024/);
    expect(geometryError({ cpuBlocks: undefined })).toMatch(/exactly one of cpuBlocks and cpuBytes/);
    expect(geometryError({ cpuBlocks: undefined, cpuBytes: -5 })).toMatch(/cpuBytes must be an integer >= 0, got -5/);
  });

  it('rejects a byte budget too small for a single offloaded block, saying how much one takes', () => {
    const perBlockAllRanks = shardBytes(TINY, 2, 16) * 2;
    expect(geometryError({ cpuBlocks: undefined, cpuBytes: perBlockAllRanks - 1 })).toMatch(
      new RegExp(`cpuBytes \\(${perBlockAllRanks - 1}\\) holds no offloaded block: one block takes ${perBlockAllRanks} bytes`),
    );
  });
});

describe('offload keys', () => {
  const gpuHashes = blockHashes(
    Array.from({ length: 7 * 16 + 5 }, (_, i) => (i * 131) % 997),
    16,
  );

  it('key each full group of f GPU blocks by the hash of its last GPU block', () => {
    expect(gpuHashes).toHaveLength(7);
    expect(offloadKeys(gpuHashes, 3)).toEqual([gpuHashes[2], gpuHashes[5]]);
    expect(offloadKeys(gpuHashes, 7)).toEqual([gpuHashes[6]]);
  });

  it('are the GPU block hashes themselves when f is 1, and none for a partial first group', () => {
    expect(offloadKeys(gpuHashes, 1)).toEqual(gpuHashes);
    expect(offloadKeys(gpuHashes, 8)).toEqual([]);
  });

  it('name a range of offloaded blocks by the same rule, one block at a time or several', () => {
    expect(offloadKeys(gpuHashes, 2, 1, 3)).toEqual([gpuHashes[3], gpuHashes[5]]);
    expect(offloadKeyOf(gpuHashes, 2, 2)).toBe(gpuHashes[5]);
    expect(offloadKeys(gpuHashes, 2, 2, 2)).toEqual([]);
  });

  it('reject an offload factor that is not a positive integer', () => {
    expect(() => offloadKeys(gpuHashes, 0)).toThrowError(/offloadFactor must be an integer >= 1, got 0/);
  });
});
