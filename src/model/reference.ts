import { CHAIN_MULTIPLIER, ELEMENT_MULTIPLIER, mix } from './mix.js';
import type { ModelShape } from './shape.js';

/**
 * The checksum transformer of docs/architecture.md, "Reference model", computed from tokens alone,
 * independent of any cache. It is the oracle every run is checked against, and
 * the host and CUDA backends must agree with it bit for bit.
 */

/** Chain state before position 0. */
export function chainInit(modelSeed: number): number {
  return mix(modelSeed >>> 0);
}

/** Chain state at position `p` holding token `token`, from the state at `p - 1`. */
export function chainNext(prev: number, token: number, p: number): number {
  return mix((prev ^ mix((token + Math.imul(CHAIN_MULTIPLIER, p + 1)) >>> 0)) >>> 0);
}

/** Flat element index of (layer, k: 0 = K / 1 = V, global head, dim). */
export function elementIndex(shape: ModelShape, layer: number, k: number, head: number, dim: number): number {
  return ((layer * 2 + k) * shape.kvHeads + head) * shape.headDim + dim;
}

/** The 16-bit KV element `e` at a position whose chain state is `s`. */
export function elementValue(shape: ModelShape, s: number, layer: number, k: number, head: number, dim: number): number {
  if (layer === 0 && k === 0) {
    if (dim === 0) return s & 0xffff;
    if (dim === 1) return s >>> 16;
  }
  const e = elementIndex(shape, layer, k, head, dim);
  return mix((s ^ Math.imul(e + 1, ELEMENT_MULTIPLIER)) >>> 0) & 0xffff;
}

/** Sum (mod 2^32) of the position's KV elements over heads [firstHead, firstHead + headCount). */
export function positionSum(shape: ModelShape, s: number, firstHead: number, headCount: number): number {
  const { layers, kvHeads: H, headDim: D } = shape;
  let sum = 0;
  for (let l = 0; l < layers; l++) {
    for (let k = 0; k < 2; k++) {
      for (let h = firstHead; h < firstHead + headCount; h++) {
        const base = ((l * 2 + k) * H + h) * D;
        let d = 0;
        if (l === 0 && k === 0) {
          sum += (s & 0xffff) + (s >>> 16);
          d = 2;
        }
        for (; d < D; d++) {
          sum += mix((s ^ Math.imul(base + d + 1, ELEMENT_MULTIPLIER)) >>> 0) & 0xffff;
        }
        sum >>>= 0;
      }
    }
  }
  return sum >>> 0;
}

/** Token sampled for position `n` from the digest summed over all ranks. */
export function sampleToken(digestSum: number, reqSeed: number, n: number, vocabSize: number): number {
  return mix(((digestSum >>> 0) ^ mix(reqSeed >>> 0) ^ n) >>> 0) % vocabSize;
}

/** Chain states for positions 0..tokens.length-1. */
export function chainStates(shape: ModelShape, tokens: ArrayLike<number>): Uint32Array {
  const states = new Uint32Array(tokens.length);
  let s = chainInit(shape.modelSeed);
  for (let p = 0; p < tokens.length; p++) {
    s = chainNext(s, tokens[p], p);
    states[p] = s;
  }
  return states;
}

/**
 * Digest of rank `rank` of `tp` over positions 0..n-1 of `tokens`:
 * g_r = sum_p imul(p + 1, sum_{e in shard r} w(p, e)).
 */
export function rankDigest(shape: ModelShape, tp: number, rank: number, tokens: ArrayLike<number>, n: number): number {
  const headCount = shape.kvHeads / tp;
  const states = chainStates(shape, Array.prototype.slice.call(tokens, 0, n) as number[]);
  let g = 0;
  for (let p = 0; p < n; p++) {
    g = (g + Math.imul(p + 1, positionSum(shape, states[p], rank * headCount, headCount))) >>> 0;
  }
  return g;
}

export type ReferenceFinishReason = 'length' | 'stopped';

export interface ReferenceRequest {
  readonly promptTokens: ArrayLike<number>;
  readonly maxTokens: number;
  readonly seed: number;
  readonly stopToken?: number | null;
}

export interface ReferenceResult {
  readonly outputTokens: number[];
  readonly finishReason: ReferenceFinishReason;
}

/**
 * Generates a request's output tokens from its prompt alone: the answer every
 * cached, offloaded, preempted or recovered run must reproduce.
 */
export function referenceGenerate(shape: ModelShape, req: ReferenceRequest): ReferenceResult {
  const prompt = req.promptTokens;
  const outputTokens: number[] = [];
  let s = chainInit(shape.modelSeed);
  let digest = 0;
  let p = 0;
  const absorb = (token: number): void => {
    s = chainNext(s, token, p);
    digest = (digest + Math.imul(p + 1, positionSum(shape, s, 0, shape.kvHeads))) >>> 0;
    p++;
  };
  for (let i = 0; i < prompt.length; i++) absorb(prompt[i]);
  for (;;) {
    const token = sampleToken(digest, req.seed, p, shape.vocabSize);
    outputTokens.push(token);
    if (req.stopToken != null && token === req.stopToken) return { outputTokens, finishReason: 'stopped' };
    if (outputTokens.length >= req.maxTokens) return { outputTokens, finishReason: 'length' };
    absorb(token);
  }
}
