import type { BlockHash } from '../core/block-hash.js';
import { ConfigError } from '../core/errors.js';
import type { KvGeometry } from '../core/kv-geometry.js';

/** How large the CPU tier is: give exactly one of the two. */
export interface CpuTierCapacity {
  /** Capacity in offloaded blocks. */
  readonly cpuBlocks?: number;
  /** Capacity in bytes over all ranks together (each rank holds its 1/tp shard of every block). */
  readonly cpuBytes?: number;
}

/** The KV geometry of the tier's blocks, and how many of them it holds. */
export interface CpuTierGeometry extends KvGeometry {
  /** Offloaded blocks the tier holds; every rank holds its shard of each at the same id. */
  readonly capacityBlocks: number;
  /** Host memory each rank allocates for its shard of the tier. */
  readonly cpuBytesPerRank: number;
}

function requireInteger(field: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new ConfigError(`${field} must be an integer >= ${min}, got ${String(value)}`);
  }
}

/** How many offloaded blocks of `kv` the capacity holds; errors name the field and value. */
export function cpuTierGeometry(kv: KvGeometry, capacity: CpuTierCapacity): CpuTierGeometry {
  const { cpuBlocks, cpuBytes } = capacity;
  if ((cpuBlocks === undefined) === (cpuBytes === undefined)) {
    throw new ConfigError(
      `give exactly one of cpuBlocks and cpuBytes, got cpuBlocks=${String(cpuBlocks)} and cpuBytes=${String(cpuBytes)}`,
    );
  }
  let capacityBlocks: number;
  if (cpuBlocks !== undefined) {
    requireInteger('cpuBlocks', cpuBlocks, 1);
    capacityBlocks = cpuBlocks;
  } else {
    const bytes = cpuBytes as number;
    requireInteger('cpuBytes', bytes, 0);
    capacityBlocks = Math.floor(bytes / kv.bytesPerCpuBlockAllRanks);
    if (capacityBlocks < 1) {
      throw new ConfigError(
        `cpuBytes (${bytes}) holds no offloaded block: one block takes ${kv.bytesPerCpuBlockAllRanks} bytes over ${kv.tp} rank(s)`,
      );
    }
  }
  return { ...kv, capacityBlocks, cpuBytesPerRank: capacityBlocks * kv.bytesPerCpuBlockPerRank };
}

/**
 * The offloaded-key rule, the only place it is written: offloaded block i of
 * a request covers GPU blocks f*i .. f*i + f - 1 and is keyed by the chained
 * hash of the last one, which pins down the whole prefix up to and including
 * it. A trailing partial group of fewer than f GPU blocks has no key yet.
 */
export function offloadKeyOf(gpuBlockHashes: readonly BlockHash[], offloadFactor: number, block: number): BlockHash {
  return gpuBlockHashes[block * offloadFactor + offloadFactor - 1];
}

/** The keys of a request's offloaded blocks [from, to); by default of every full one. */
export function offloadKeys(
  gpuBlockHashes: readonly BlockHash[],
  offloadFactor: number,
  from = 0,
  to = Math.floor(gpuBlockHashes.length / offloadFactor),
): BlockHash[] {
  requireInteger('offloadFactor', offloadFactor, 1);
  const keys: BlockHash[] = [];
  for (let block = from; block < to; block++) keys.push(offloadKeyOf(gpuBlockHashes, offloadFactor, block));
  return keys;
}
