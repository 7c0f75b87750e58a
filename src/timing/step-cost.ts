import { elementsPerToken, KV_ELEMENT_BYTES, type ModelShape } from '../model/shape.js';
import { DEFAULT_EFFICIENCY, type ComputeEfficiency, type GpuProfile } from './gpu-profiles.js';

/**
 * The step clock: how long one engine step computes on each rank, from what
 * the step does (docs/architecture.md, "The step clock"). A roofline: the
 * larger of the step's FLOPs over the GPU's FLOP/s and its bytes (weights
 * once, the KV it reads and writes) over the memory bandwidth, each at the
 * share of peak a serving engine reaches, plus a fixed cost per step.
 */

/** What one step computes, summed over its requests. */
export interface StepWork {
  readonly requests: number;
  /** New tokens computed. */
  readonly tokens: number;
  /** Tokens sampled (each runs the LM head). */
  readonly sampledTokens: number;
  /** (query, key) position pairs attention visits: a request computing n tokens after s cached ones visits n*s + n(n+1)/2. */
  readonly attendedPairs: number;
  /** KV positions read: each request's whole context, new tokens included. */
  readonly contextTokens: number;
}

/** A step's work, summed in place so the scheduler allocates nothing per step. */
export class StepWorkTally implements StepWork {
  requests = 0;
  tokens = 0;
  sampledTokens = 0;
  attendedPairs = 0;
  contextTokens = 0;

  reset(): void {
    this.requests = 0;
    this.tokens = 0;
    this.sampledTokens = 0;
    this.attendedPairs = 0;
    this.contextTokens = 0;
  }

  /** A request computing `tokens` new tokens after `start` cached ones. */
  add(start: number, tokens: number, sampled: boolean): void {
    this.requests += 1;
    this.tokens += tokens;
    if (sampled) this.sampledTokens += 1;
    this.attendedPairs += tokens * start + (tokens * (tokens + 1)) / 2;
    this.contextTokens += start + tokens;
  }
}

/** Prices one step's compute on each rank. */
export interface StepClock {
  /** Busy nanoseconds of each rank for the step (0 for a step that computes nothing). */
  computeNs(work: StepWork): number;
  /** How reports name the clock: "llama-8b on h100-sxm x2", or a flat cost per token. */
  readonly description: string;
  /** Whether it prices steps on a GPU profile (false: a flat cost per token). */
  readonly usesProfile: boolean;
}

/** The model's figures the roofline needs, with a custom shape's missing ones estimated. */
export interface ModelCompute {
  readonly parameters: number;
  readonly hiddenSize: number;
  readonly attentionHeads: number;
  readonly vocabSize: number;
  readonly layers: number;
  readonly headDim: number;
  /** KV bytes of one token position, all layers and heads. */
  readonly kvBytesPerToken: number;
}

export function modelCompute(model: ModelShape): ModelCompute {
  const attentionHeads = model.attentionHeads ?? model.kvHeads;
  const hiddenSize = model.hiddenSize ?? attentionHeads * model.headDim;
  const parameters = model.parameters ?? 12 * model.layers * hiddenSize * hiddenSize + 2 * model.vocabSize * hiddenSize;
  return {
    parameters,
    hiddenSize,
    attentionHeads,
    vocabSize: model.vocabSize,
    layers: model.layers,
    headDim: model.headDim,
    kvBytesPerToken: elementsPerToken(model) * KV_ELEMENT_BYTES,
  };
}

/** Weights of 16 bits. */
const WEIGHT_BYTES = 2;

export class RooflineStepClock implements StepClock {
  readonly description: string;
  readonly usesProfile = true;
  private readonly m: ModelCompute;
  private readonly vocabMatrix: number;

  constructor(
    model: ModelShape,
    readonly gpu: GpuProfile,
    readonly tp: number,
    readonly efficiency: ComputeEfficiency = DEFAULT_EFFICIENCY,
  ) {
    if (!Number.isInteger(tp) || tp < 1) throw new RangeError(`tp ${tp} must be a positive integer`);
    this.m = modelCompute(model);
    this.vocabMatrix = this.m.vocabSize * this.m.hiddenSize;
    this.description = `${model.name} on ${gpu.name}${tp > 1 ? ` x${tp}` : ''}`;
  }

  /** FLOPs of the whole model (all ranks) for the step's dense layers and attention. */
  flops(work: StepWork): { dense: number; attention: number } {
    const { parameters, layers, attentionHeads, headDim } = this.m;
    // Every computed token runs the layers; only sampled ones run the LM head. The input embedding is a lookup.
    const dense = 2 * (parameters - 2 * this.vocabMatrix) * work.tokens + 2 * this.vocabMatrix * work.sampledTokens;
    // Q.K and attention x V: 2 FLOPs per multiply-add, each over headDim, per head and layer.
    const attention = 4 * layers * attentionHeads * headDim * work.attendedPairs;
    return { dense, attention };
  }

  /** Bytes the whole model moves through memory in the step: the weights once, the KV read and written. */
  bytes(work: StepWork): number {
    const weights = (this.m.parameters - this.vocabMatrix) * WEIGHT_BYTES;
    return weights + this.m.kvBytesPerToken * (work.contextTokens + work.tokens);
  }

  computeNs(work: StepWork): number {
    if (work.tokens === 0) return 0;
    const { dense, attention } = this.flops(work);
    const e = this.efficiency;
    const peak = this.gpu.peakFlops * this.tp;
    const computeSeconds = dense / (peak * e.matmul) + attention / (peak * e.attention);
    const memorySeconds = this.bytes(work) / (this.gpu.memoryBytesPerSecond * this.tp * e.memory);
    return Math.round(Math.max(computeSeconds, memorySeconds) * 1e9 + e.stepOverheadUs * 1e3);
  }
}

/** The explicit override: a flat busy time per new token, shared by the ranks. */
export class FlatStepClock implements StepClock {
  readonly description: string;
  readonly usesProfile = false;

  constructor(
    readonly nsPerToken: number,
    readonly tp: number,
  ) {
    this.description = `${nsPerToken} ns per token (flat)`;
  }

  computeNs(work: StepWork): number {
    return Math.round((work.tokens * this.nsPerToken) / this.tp);
  }
}

/** The model's own flat cost when it sets one, else the roofline on the profile. */
export function stepClockFor(model: ModelShape, gpu: GpuProfile, tp: number): StepClock {
  return model.computeNsPerToken !== undefined ? new FlatStepClock(model.computeNsPerToken, tp) : new RooflineStepClock(model, gpu, tp);
}
