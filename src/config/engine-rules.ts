import { bytesPerGpuBlock, type ModelShape } from '../model/shape.js';
import { invalidSetting, type ConfigIssue } from './issues.js';
import { MAX_CPU_BLOCKS } from './limits.js';

/**
 * Rules across the engine's settings, each stated once. The engine
 * (resolveEngineConfig), the scheduler's config and the CLI all apply them;
 * each returns the issue on the setting to change, or null.
 */

/** Each rank holds an equal share of every layer's KV heads. */
export function tpIssue(model: ModelShape, tp: number): ConfigIssue | null {
  if (model.kvHeads % tp === 0) return null;
  return invalidSetting('tp', `the ${model.name} model's ${model.kvHeads} KV heads must split evenly over the ranks`);
}

/** A request of maxModelLen tokens must fit the GPU KV cache, or it would preempt itself forever. */
export function modelLenIssue(maxModelLen: number, gpuBlocks: number, blockSize: number): ConfigIssue | null {
  const capacity = gpuBlocks * blockSize;
  if (maxModelLen <= capacity) return null;
  return invalidSetting('maxModelLen', `a request must fit the GPU KV cache: ${gpuBlocks} blocks x ${blockSize} tokens = ${capacity} tokens`);
}

/** The longest request the engine takes when the config sets no maxModelLen: the GPU KV cache, at most 128 Ki tokens. */
export function defaultMaxModelLen(gpuBlocks: number, blockSize: number): number {
  return Math.min(131_072, gpuBlocks * blockSize);
}

/** Without chunked prefill a whole prompt is computed in one step, so the step budget must hold the longest one. */
export function stepBudgetIssue(maxNumBatchedTokens: number, maxModelLen: number, enableChunkedPrefill: boolean): ConfigIssue | null {
  if (enableChunkedPrefill || maxNumBatchedTokens >= maxModelLen) return null;
  return invalidSetting(
    'maxNumBatchedTokens',
    `without chunked prefill a whole prompt must fit one step: at least maxModelLen (${maxModelLen}) tokens`,
  );
}

/** A CPU tier given in bytes holds at least one offloaded block and at most MAX_CPU_BLOCKS (a block's bytes over all ranks do not depend on tp). */
export function cpuBytesIssue(model: ModelShape, blockSize: number, offloadFactor: number, cpuBytes: number): ConfigIssue | null {
  const { blocks, blockBytes } = cpuBytesCapacity(model, blockSize, offloadFactor, cpuBytes);
  if (blocks < 1) return invalidSetting('cpuBytes', `holds no offloaded block: one takes ${blockBytes} bytes over all ranks`);
  if (blocks > MAX_CPU_BLOCKS) {
    return invalidSetting('cpuBytes', `makes ${blocks} CPU blocks of ${blockBytes} bytes, over the limit of ${MAX_CPU_BLOCKS}`);
  }
  return null;
}

/** The offloaded blocks `cpuBytes` hold over all ranks, and one block's bytes over all ranks. */
export function cpuBytesCapacity(model: ModelShape, blockSize: number, offloadFactor: number, cpuBytes: number): { blocks: number; blockBytes: number } {
  const blockBytes = offloadFactor * bytesPerGpuBlock(model, 1, blockSize);
  return { blocks: Math.floor(cpuBytes / blockBytes), blockBytes };
}

/** The settings the rules read; a setting left out is not checked (the CLI decides tp later). */
export interface EngineRuleInput {
  readonly model: ModelShape;
  readonly tp?: number;
  readonly blockSize: number;
  readonly gpuBlocks: number;
  readonly maxModelLen?: number;
  readonly maxNumBatchedTokens?: number;
  readonly enableChunkedPrefill?: boolean;
  readonly offloadFactor: number;
  /** Given only when offloading is on. */
  readonly cpuBytes?: number;
}

/** The first rule the settings break, or null. */
export function engineRuleIssue(c: EngineRuleInput): ConfigIssue | null {
  return (
    (c.tp === undefined ? null : tpIssue(c.model, c.tp)) ??
    (c.maxModelLen === undefined ? null : modelLenIssue(c.maxModelLen, c.gpuBlocks, c.blockSize)) ??
    (c.maxModelLen === undefined || c.maxNumBatchedTokens === undefined
      ? null
      : stepBudgetIssue(c.maxNumBatchedTokens, c.maxModelLen, c.enableChunkedPrefill ?? true)) ??
    (c.cpuBytes === undefined ? null : cpuBytesIssue(c.model, c.blockSize, c.offloadFactor, c.cpuBytes))
  );
}
