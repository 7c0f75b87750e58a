import { describe, expect, it } from 'vitest';
import { BenchOptions } from '../../src/cli/bench-options.js';
import { looseFlagInput } from '../../src/cli/config-input.js';
import { parseRunArgs } from '../../src/cli/run-config.js';

/** The message `kvtier run` refuses `--flag value` with. */
function runRefusal(flag: string, value: string): string {
  try {
    parseRunArgs([flag, value]);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`run accepted ${flag} ${value}`);
}

/** The message a bench refuses `--flag value` with, read as an engine setting. */
function benchRefusal(flag: string, value: string, key: 'tp' | 'gpuBlocks' | 'blockSize'): string {
  const options = new BenchOptions('e2e', looseFlagInput([flag, value]));
  try {
    options.engineInt(key, key, 1);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`the bench accepted ${flag} ${value}`);
}

describe('an engine setting given as a flag', () => {
  it.each([
    ['--tp', '0', 'tp'],
    ['--gpu-blocks', '1.5', 'gpuBlocks'],
    ['--block-size', '0x10', 'blockSize'],
    ['--block-size', '8192', 'blockSize'],
  ] as const)('%s %s is refused by run and by the benches in the same words', (flag, value, key) => {
    expect(benchRefusal(flag, value, key)).toBe(`bench e2e: ${runRefusal(flag, value)}`);
  });

  it('is read by the benches as run reads it', () => {
    const options = new BenchOptions('e2e', looseFlagInput(['--gpu-blocks', '1e3']));
    expect(options.engineInt('gpuBlocks', 'gpuBlocks', 1)).toBe(parseRunArgs(['--gpu-blocks', '1e3']).gpuBlocks);
  });
});
