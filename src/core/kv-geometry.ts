import { bytesPerGpuBlock, KV_ELEMENT_BYTES, type ModelShape } from '../model/shape.js';
import { ConfigError } from './errors.js';

/**
 * `cross-layer`: a GPU block is one contiguous region holding every layer's K
 * and V. `per-layer`: each layer's part of a block is its own region.
 */
export type KvLayout = 'cross-layer' | 'per-layer';

/** What a KV geometry is resolved from; `offloadFactor` defaults to 1, `layout` to cross-layer. */
export interface KvGeometryInput {
  readonly model: ModelShape;
  /** Tensor-parallel ranks; each holds kvHeads/tp heads of every layer. */
  readonly tp: number;
  /** Tokens per GPU block. */
  readonly blockSize: number;
  /** GPU blocks per offloaded (CPU) block, f >= 1. */
  readonly offloadFactor?: number;
  readonly layout?: KvLayout;
}

/**
 * The shape of the KV cache, resolved once and passed whole to every layer
 * that sizes, moves or names blocks: the device, the rank setup, the
 * connector, the CPU tier, the remote tier, the simulator and the benches.
 * Plain data, so it crosses to rank threads as it is.
 */
export interface KvGeometry {
  readonly model: ModelShape;
  readonly tp: number;
  readonly blockSize: number;
  readonly offloadFactor: number;
  readonly layout: KvLayout;
  /** KV heads each rank holds (kvHeads / tp). */
  readonly kvHeadsPerRank: number;
  /** Bytes of one KV element. */
  readonly elementBytes: number;
  /** Tokens per offloaded block: offloadFactor x blockSize. */
  readonly offloadedBlockTokens: number;
  /** One rank's share of one GPU block. */
  readonly bytesPerGpuBlockPerRank: number;
  /** One rank's shard of one offloaded block. */
  readonly bytesPerCpuBlockPerRank: number;
  /** One offloaded block over all ranks. */
  readonly bytesPerCpuBlockAllRanks: number;
}

function requireInteger(field: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new ConfigError(`${field} must be an integer >= ${min}, got ${String(value)}`);
  }
}

/** Resolves and checks a geometry; errors name the field and value. */
export function kvGeometry(input: KvGeometryInput): KvGeometry {
  const { model, tp, blockSize } = input;
  const offloadFactor = input.offloadFactor ?? 1;
  const layout = input.layout ?? 'cross-layer';
  requireInteger('tp', tp, 1);
  if (model.kvHeads % tp !== 0) {
    throw new ConfigError(`tp (${tp}) must divide the model's kvHeads (${model.kvHeads})`);
  }
  requireInteger('blockSize', blockSize, 1);
  requireInteger('offloadFactor', offloadFactor, 1);
  if (layout !== 'cross-layer' && layout !== 'per-layer') {
    throw new ConfigError(`layout must be 'cross-layer' or 'per-layer', got ${JSON.stringify(layout)}`);
  }
  const bytesPerGpuBlockPerRank = bytesPerGpuBlock(model, tp, blockSize);
  const bytesPerCpuBlockPerRank = offloadFactor * bytesPerGpuBlockPerRank;
  return {
    model,
    tp,
    blockSize,
    offloadFactor,
    layout,
    kvHeadsPerRank: model.kvHeads / tp,
    elementBytes: KV_ELEMENT_BYTES,
    offloadedBlockTokens: offloadFactor * blockSize,
    bytesPerGpuBlockPerRank,
    bytesPerCpuBlockPerRank,
    bytesPerCpuBlockAllRanks: tp * bytesPerCpuBlockPerRank,
  };
}
