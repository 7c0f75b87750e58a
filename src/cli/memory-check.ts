import { totalmem } from 'node:os';
import { MODEL_PRESETS } from '../model/presets.js';
import { bytesPerGpuBlock } from '../model/shape.js';
import { kvGeometry } from '../core/kv-geometry.js';
import { cpuTierGeometry } from '../offload/geometry.js';
import { formatBytes } from '../core/byte-size.js';
import type { ResolvedRunConfig } from './run-config.js';
import { UsageError } from './usage-error.js';

/**
 * Pool sizes are given in blocks, and a block of a large model is
 * megabytes: `--model llama-70b` with the tiny model's default pools asks for
 * tens of GiB. Checking the sizes against the machine's memory before any
 * rank allocates turns that into one clear error instead of a machine
 * swapping or an allocation failing minutes in.
 */

export interface RunMemory {
  /** Every rank's GPU KV cache together (host memory on the host backend). */
  readonly gpuPoolBytes: number;
  /** The CPU tier over all ranks (0 without offloading). */
  readonly cpuTierBytes: number;
  /** What the run allocates in host memory: the CPU tier, plus the GPU pool on the host backend. */
  readonly hostBytes: number;
}

export function runMemory(config: ResolvedRunConfig): RunMemory {
  const model = MODEL_PRESETS[config.model];
  const gpuPoolBytes = config.tp * config.gpuBlocks * bytesPerGpuBlock(model, config.tp, config.blockSize);
  let cpuTierBytes = 0;
  // --compare implies offload (its second run has the tier on).
  if (config.offload) {
    const geometry = cpuTierGeometry(
      kvGeometry({ model, tp: config.tp, blockSize: config.blockSize, offloadFactor: config.offloadFactor }),
      config.cpuBytes !== null ? { cpuBytes: config.cpuBytes } : { cpuBlocks: config.cpuBlocks ?? undefined },
    );
    cpuTierBytes = geometry.capacityBlocks * geometry.bytesPerCpuBlockAllRanks;
  }
  const hostBytes = cpuTierBytes + (config.backend === 'host' ? gpuPoolBytes : 0);
  return { gpuPoolBytes, cpuTierBytes, hostBytes };
}

/** Throws a UsageError when the run's host allocations exceed the machine's memory. */
export function checkHostMemory(config: ResolvedRunConfig, machineBytes: number = totalmem()): void {
  const memory = runMemory(config);
  if (memory.hostBytes <= machineBytes) return;
  const parts = [`CPU tier ${formatBytes(memory.cpuTierBytes)}`];
  if (config.backend === 'host') parts.unshift(`GPU pool ${formatBytes(memory.gpuPoolBytes)}`);
  throw new UsageError(
    `the ${config.model} model's KV pools need ${formatBytes(memory.hostBytes)} of host memory (${parts.join(' + ')}) ` +
      `but this machine has ${formatBytes(machineBytes)}: lower --gpu-blocks or size the tier with --cpu-bytes`,
  );
}
