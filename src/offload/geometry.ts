import type { BlockHash } from '../core/block-hash.js';
import { ConfigError } from '../core/errors.js';
import { bytesPerGpuBlock, type ModelShape } from '../model/shape.js';

export interface CpuTierGeometryInput {
  readonly model: ModelShape;
  readonly tp: number;
  /** Tokens per GPU block. */
  readonly blockSize: number;
  /** GPU blocks per offloaded (CPU) block, f >= 1. */
  readonly offloadFactor: number;
  /** Capacity in offloaded blocks. Give exactly one of cpuBlocks and cpuBytes. */
  readonly cpuBlocks?: number;
  /** Capacity in bytes over all ranks together (each rank holds its 1/tp shard of every block). */
  readonly cpuBytes?: number;
}

export interface CpuTierGeometry {
  readonly offloadFactor: number;
  /** Tokens per offloaded block: offloadFactor x blockSize. */
  readonly offloadedBlockTokens: number;
  readonly bytesPerGpuBlockPerRank: number;
  /** One rank's shard of one offloaded block. */
  readonly bytesPerCpuBlockPerRank: number;
  /** One offloaded block over all ranks. */
  readonly bytesPerCpuBlockAllRanks: number;
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

/** Sizes of the CPU tier's blocks and how many fit; errors name the field and value. */
export function cpuTierGeometry(input: CpuTierGeometryInput): CpuTierGeometry {
  const { model, tp, blockSize, offloadFactor, cpuBlocks, cpuBytes } = input;
  requireInteger('tp', tp, 1);
  if (model.kvHeads % tp !== 0) {
    throw new ConfigError(`tp (${tp}) must divide the model's kvHeads (${model.kvHeads})`);
  }
  requireInteger('blockSize', blockSize, 1);
  requireInteger('offloadFactor', offloadFactor, 1);
  if ((cpuBlocks === undefined) === (cpuBytes === undefined)) {
    throw new ConfigError(
      `give exactly one of cpuBlocks and cpuBytes, got cpuBlocks=${String(cpuBlocks)} and cpuBytes=${String(cpuBytes)}`,
    );
  }

  const bytesPerGpuBlockPerRank = bytesPerGpuBlock(model, tp, blockSize);
  const bytesPerCpuBlockPerRank = offloadFactor * bytesPerGpuBlockPerRank;
  const bytesPerCpuBlockAllRanks = tp * bytesPerCpuBlockPerRank;

  let capacityBlocks: number;
  if (cpuBlocks !== undefined) {
    requireInteger('cpuBlocks', cpuBlocks, 1);
    capacityBlocks = cpuBlocks;
  } else {
    const bytes = cpuBytes as number;
    requireInteger('cpuBytes', bytes, 0);
    capacityBlocks = Math.floor(bytes / bytesPerCpuBlockAllRanks);
    if (capacityBlocks < 1) {
      throw new ConfigError(
        `cpuBytes (${bytes}) holds no offloaded block: one block takes ${bytesPerCpuBlockAllRanks} bytes over ${tp} rank(s)`,
      );
    }
  }

  return {
    offloadFactor,
    offloadedBlockTokens: offloadFactor * blockSize,
    bytesPerGpuBlockPerRank,
    bytesPerCpuBlockPerRank,
    bytesPerCpuBlockAllRanks,
    capacityBlocks,
    cpuBytesPerRank: capacityBlocks * bytesPerCpuBlockPerRank,
  };
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
