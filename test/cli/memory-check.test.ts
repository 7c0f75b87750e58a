import { describe, expect, it } from 'vitest';
import { checkHostMemory, runMemory } from '../../src/cli/memory-check.js';
import { parseRunArgs, resolveRunConfig, type ResolvedRunConfig } from '../../src/cli/run-config.js';
import { UsageError } from '../../src/cli/usage-error.js';

const GiB = 2 ** 30;

function hostRun(argv: string[]): ResolvedRunConfig {
  return resolveRunConfig(parseRunArgs(['--backend', 'host', ...argv]), 0);
}

describe('the host memory a run needs', () => {
  it('counts the GPU pool of every rank and the CPU tier on the host backend', () => {
    // tiny: 256 bytes per token over all ranks, so a 16-token block is 4 KiB.
    expect(runMemory(hostRun(['--gpu-blocks', '100', '--cpu-blocks', '300']))).toEqual({
      gpuPoolBytes: 100 * 4096,
      cpuTierBytes: 300 * 4096,
      hostBytes: 400 * 4096,
    });
  });

  it('leaves the GPU pool out on cuda, where it lives in device memory', () => {
    const config = resolveRunConfig(parseRunArgs(['--gpu-blocks', '100', '--cpu-blocks', '300']), 2);
    expect(runMemory(config)).toMatchObject({ cpuTierBytes: 300 * 4096, hostBytes: 300 * 4096 });
  });

  it('counts no CPU tier with --no-offload', () => {
    expect(runMemory(hostRun(['--gpu-blocks', '100', '--no-offload'])).hostBytes).toBe(100 * 4096);
  });

  it('rounds a byte-sized tier down to whole offloaded blocks', () => {
    expect(runMemory(hostRun(['--cpu-bytes', '10000', '--offload-factor', '2'])).cpuTierBytes).toBe(8192);
  });
});

describe('checking a run against the machine', () => {
  it("refuses pools larger than the machine's memory, saying what they need", () => {
    const config = hostRun(['--model', 'llama-8b', '--gpu-blocks', '1024', '--cpu-blocks', '8192']);
    // llama-8b: 32 layers x K,V x 8 heads x 128 dims x 2 bytes x 16 tokens = 2 MiB a block.
    expect(() => checkHostMemory(config, 16 * GiB)).toThrow(
      new UsageError(
        "the llama-8b model's KV pools need 18.00 GiB of host memory (GPU pool 2.00 GiB + CPU tier 16.00 GiB) " +
          'but this machine has 16.00 GiB: lower --gpu-blocks or size the tier with --cpu-bytes',
      ),
    );
  });

  it('accepts pools that fit', () => {
    expect(() => checkHostMemory(hostRun(['--gpu-blocks', '100', '--cpu-blocks', '300']), GiB)).not.toThrow();
  });
});
