import { z } from 'zod';

/**
 * The shape of the reference model: what the device allocates and computes,
 * and what the step clock prices (src/timing/step-cost.ts). `parameters`,
 * `hiddenSize` and `attentionHeads` are the real model's; a custom shape
 * without them gets the usual estimates (attention heads = KV heads, hidden =
 * heads x head dim, 12 x layers x hidden^2 plus two vocabulary matrices).
 * `computeNsPerToken`, when set, replaces the step clock by a flat busy time
 * per new token (the whole model's; each of `tp` ranks takes 1/tp of it).
 */
export interface ModelShape {
  readonly name: string;
  readonly layers: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  readonly modelSeed: number;
  /** Weights, counted with both vocabulary matrices (embedding and LM head). */
  readonly parameters?: number;
  readonly hiddenSize?: number;
  /** Query heads (grouped-query attention shares each KV head among several). */
  readonly attentionHeads?: number;
  readonly computeNsPerToken?: number;
}

export const modelShapeSchema = z
  .object({
    name: z.string().min(1),
    layers: z.number().int().min(1).max(1024),
    kvHeads: z.number().int().min(1).max(1024),
    headDim: z.number().int().min(2).max(4096),
    vocabSize: z.number().int().min(2).max(2 ** 31 - 1),
    modelSeed: z.number().int().min(0).max(0xffffffff),
    parameters: z.number().int().min(1).max(1e14).optional(),
    hiddenSize: z.number().int().min(1).max(1 << 20).optional(),
    attentionHeads: z.number().int().min(1).max(1 << 16).optional(),
    computeNsPerToken: z.number().int().min(0).max(1e9).optional(),
  })
  .strict();

/** Bytes of one KV element (16-bit). */
export const KV_ELEMENT_BYTES = 2;

/** KV elements of one token position over all layers, K and V, and all heads. */
export function elementsPerToken(shape: ModelShape): number {
  return shape.layers * 2 * shape.kvHeads * shape.headDim;
}

/** KV elements of one token position held by one of `tp` ranks. */
export function elementsPerTokenPerRank(shape: ModelShape, tp: number): number {
  return elementsPerToken(shape) / tp;
}

/** Bytes of one GPU block (blockSize tokens) on one rank. */
export function bytesPerGpuBlock(shape: ModelShape, tp: number, blockSize: number): number {
  return elementsPerTokenPerRank(shape, tp) * blockSize * KV_ELEMENT_BYTES;
}
