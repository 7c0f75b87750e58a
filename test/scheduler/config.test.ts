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
    expect(configError({ ...valid, blockSize: 0 }).message).toMatch(/field 'blockSize'.*got 0/);
    expect(configError({ ...valid, maxNumSeqs: 2.5 }).message).toMatch(/field 'maxNumSeqs'.*got 2.5/);
    expect(configError({ ...valid, failurePolicy: 'retry' }).message).toMatch(/field 'failurePolicy'.*got 'retry'/);
    const { vocabSize: _omitted, ...withoutVocab } = valid;
    expect(configError(withoutVocab).message).toMatch(/field 'vocabSize'.*got nothing/);
  });

  it('rejects unknown fields by name', () => {
    expect(configError({ ...valid, blocksize: 16 }).message).toMatch(/unknown field\(s\) 'blocksize'/);
  });

  it('rejects a maxModelLen the GPU pool could never hold', () => {
    expect(configError({ ...valid, numGpuBlocks: 100 }).message).toMatch(
      /field 'maxModelLen': 4096 tokens need 256 blocks of 16, more than numGpuBlocks 100/,
    );
  });

  it('without chunked prefill, requires a step budget that fits the longest prompt', () => {
    expect(configError({ ...valid, enableChunkedPrefill: false }).message).toMatch(/field 'maxNumBatchedTokens'/);
    expect(parseSchedulerConfig({ ...valid, enableChunkedPrefill: false, maxNumBatchedTokens: 4096 }).enableChunkedPrefill).toBe(false);
  });
});
