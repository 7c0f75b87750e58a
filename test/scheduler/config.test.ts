import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/errors.js';
import { parseSchedulerConfig } from '../../src/scheduler/config.js';

const valid = {
  blockSize: 16,
  numGpuBlocks: 1024,
  maxNumBatchedTokens: 2048,
  maxNumSeqs: 64,
  maxModelLen: 4096,
  vocabSize: 32000,
};

function configError(input: unknown): ConfigError {
  try {
    parseSchedulerConfig(input);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('ERR_KVTIER_CONFIG');
    return err as ConfigError;
  }
  throw new Error('config was accepted');
}

describe('scheduler config', () => {
  it('applies the defaults: chunked prefill and prefix caching on, failed loads recomputed', () => {
    const config = parseSchedulerConfig(valid);
    expect(config.enableChunkedPrefill).toBe(true);
    expect(config.enablePrefixCaching).toBe(true);
    expect(config.failurePolicy).toBe('recompute');
  });

  it('names the field and the value it got', () => {
    expect(configError({ ...valid, blockSize: 0 }).message).toBe('scheduler config: blockSize: invalid value 0: expected a positive integer');
    expect(configError({ ...valid, maxNumSeqs: 2.5 }).message).toBe('scheduler config: maxNumSeqs: invalid value 2.5: expected a positive integer');
    expect(configError({ ...valid, failurePolicy: 'retry' }).message).toBe(
      'scheduler config: failurePolicy: invalid value "retry": expected one of recompute, fail',
    );
    const { vocabSize: _omitted, ...withoutVocab } = valid;
    expect(configError(withoutVocab).message).toMatch(/^scheduler config: vocabSize: missing: /);
  });

  it("refuses what the engine's settings refuse, with the same limits", () => {
    expect(configError({ ...valid, numGpuBlocks: 2 ** 22 + 1 }).message).toBe(
      `scheduler config: numGpuBlocks: invalid value ${2 ** 22 + 1}: expected a positive integer up to ${2 ** 22}`,
    );
    expect(configError({ ...valid, blockSize: 8192 }).message).toMatch(/blockSize: invalid value 8192: expected a positive integer up to 4096$/);
  });

  it('rejects unknown fields by name', () => {
    expect(configError({ ...valid, blocksize: 16 }).message).toBe('scheduler config: unknown key "blocksize"');
  });

  it('rejects a maxModelLen the GPU pool could never hold', () => {
    expect(configError({ ...valid, numGpuBlocks: 100 }).message).toBe(
      'scheduler config: maxModelLen: invalid value 4096: a request must fit the GPU KV cache: 100 blocks x 16 tokens = 1600 tokens',
    );
  });

  it('without chunked prefill, requires a step budget that fits the longest prompt', () => {
    expect(configError({ ...valid, enableChunkedPrefill: false }).message).toMatch(/^scheduler config: maxNumBatchedTokens: invalid value 2048: without chunked prefill/);
    expect(parseSchedulerConfig({ ...valid, enableChunkedPrefill: false, maxNumBatchedTokens: 4096 }).enableChunkedPrefill).toBe(false);
  });
});
