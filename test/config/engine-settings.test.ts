import { describe, expect, it } from 'vitest';
import { parseSweepPolicy } from '../../src/bench/sweep.js';
import { benchCommand } from '../../src/cli/bench.js';
import { BenchOptions } from '../../src/cli/bench-options.js';
import { parseRunArgs, resolveRunConfig, toEngineConfig } from '../../src/cli/run-config.js';
import { KvtierError } from '../../src/core/errors.js';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { resolveEngineConfig, type EngineConfig } from '../../src/runtime/engine-config.js';
import type { EngineConfigInput } from '../../src/runtime/engine-types.js';
import { parseSchedulerConfig } from '../../src/scheduler/config.js';
import { namedFlagInput } from '../../src/cli/config-input.js';

/**
 * The engine's settings are stated once: the library, the scheduler's
 * config, `kvtier run` and the benches refuse the same values for the same
 * reasons, and say so in the same words, each naming the setting the way its
 * user wrote it (a key, a flag, or a bench option).
 */

/** The message a call fails with (it must fail with one of kvtier's errors). */
function refusal(call: () => unknown): string {
  try {
    call();
  } catch (err) {
    expect(err).toBeInstanceOf(KvtierError);
    return (err as Error).message;
  }
  throw new Error('the value was accepted');
}

const engineRefusal = (input: Record<string, unknown>) => refusal(() => resolveEngineConfig(input as EngineConfigInput));
const runRefusal = (...argv: string[]) => refusal(() => parseRunArgs(argv));

const SCHEDULER = { blockSize: 16, numGpuBlocks: 1024, maxNumBatchedTokens: 2048, maxNumSeqs: 64, maxModelLen: 4096, vocabSize: 32000 };
const schedulerRefusal = (input: Record<string, unknown>) => refusal(() => parseSchedulerConfig({ ...SCHEDULER, ...input }));

describe('a setting past its limit', () => {
  // [engine key, scheduler key, kvtier run flag, value, what every one of them expects]
  it.each([
    ['blockSize', 'blockSize', '--block-size', 8192, 'expected a positive integer up to 4096'],
    ['gpuBlocks', 'numGpuBlocks', '--gpu-blocks', 2 ** 22 + 1, 'expected a positive integer up to 4194304'],
    ['maxNumSeqs', 'maxNumSeqs', '--max-num-seqs', 2 ** 20 + 1, 'expected a positive integer up to 1048576'],
    ['maxNumBatchedTokens', 'maxNumBatchedTokens', '--max-batched-tokens', 2 ** 24 + 1, 'expected a positive integer up to 16777216'],
    ['maxModelLen', 'maxModelLen', '--max-model-len', 2 ** 24 + 1, 'expected a positive integer up to 16777216'],
  ] as const)('%s is refused alike by the engine, the scheduler and kvtier run, naming it and the value', (key, schedulerKey, flag, value, expected) => {
    expect(engineRefusal({ [key]: value })).toBe(`invalid engine config: ${key}: invalid value ${value}: ${expected}`);
    expect(schedulerRefusal({ [schedulerKey]: value })).toBe(`scheduler config: ${schedulerKey}: invalid value ${value}: ${expected}`);
    expect(runRefusal(flag, String(value))).toBe(`${flag}: invalid value "${value}": ${expected}`);
  });

  it("is refused by a bench option that sets it, in the engine's range and words", () => {
    const options = new BenchOptions('e2e', namedFlagInput({ blockSize: '8192' }));
    expect(refusal(() => options.engineInt('blockSize', 'blockSize', 16))).toBe('bench e2e: --block-size: invalid value "8192": expected a positive integer up to 4096');
    expect(new BenchOptions('e2e', namedFlagInput({ blockSize: '4096' })).engineInt('blockSize', 'blockSize', 16)).toBe(4096);
  });
});

describe('rules across settings', () => {
  it('a maxModelLen past the GPU KV cache is refused by the library and the CLI in the same words', () => {
    const reason = 'a request must fit the GPU KV cache: 1000 blocks x 16 tokens = 16000 tokens';
    expect(engineRefusal({ gpuBlocks: 1000, maxModelLen: 20000 })).toBe(`invalid engine config: maxModelLen: invalid value 20000: ${reason}`);
    expect(runRefusal('--gpu-blocks', '1000', '--max-model-len', '20000')).toBe(`--max-model-len: invalid value "20000": ${reason}`);
    expect(schedulerRefusal({ numGpuBlocks: 1000, maxModelLen: 20000 })).toBe(`scheduler config: maxModelLen: invalid value 20000: ${reason}`);
  });

  it("a rank count that does not split the model's KV heads is refused by the library, the CLI and the benches in the same words", async () => {
    const reason = "the tiny model's 4 KV heads must split evenly over the ranks";
    expect(engineRefusal({ tp: 3 })).toBe(`invalid engine config: tp: invalid value 3: ${reason}`);
    expect(runRefusal('--tp', '3')).toBe(`--tp: invalid value "3": ${reason}`);
    await expect(benchCommand('transfer', namedFlagInput({ backend: 'host', models: 'tiny', tp: '3' }))).rejects.toThrow(`bench transfer: --tp: invalid value "3": ${reason}`);
  });

  it('a CPU tier in bytes too small for one block is refused by the library and the CLI in the same words', () => {
    const blockBytes = 16 * 2 * MODEL_PRESETS.tiny.layers * MODEL_PRESETS.tiny.kvHeads * MODEL_PRESETS.tiny.headDim * 2;
    const reason = `holds no offloaded block: one takes ${blockBytes} bytes over all ranks`;
    expect(engineRefusal({ cpuBytes: 1 })).toBe(`invalid engine config: cpuBytes: invalid value 1: ${reason}`);
    expect(runRefusal('--cpu-bytes', '1')).toBe(`--cpu-bytes: invalid value "1": ${reason}`);
  });

  it('without chunked prefill, the library refuses a step budget below maxModelLen before the scheduler is built', () => {
    expect(engineRefusal({ enableChunkedPrefill: false, maxModelLen: 4096, maxNumBatchedTokens: 2048 })).toMatch(
      /^invalid engine config: maxNumBatchedTokens: invalid value 2048: without chunked prefill a whole prompt must fit one step/,
    );
    expect(resolveEngineConfig({ enableChunkedPrefill: false, maxModelLen: 2048, maxNumBatchedTokens: 2048 }).enableChunkedPrefill).toBe(false);
  });
});

describe('a config giving every key', () => {
  it('resolves with each value as given, the model resolved to its shape with the compute time applied', () => {
    // cpuBytes is the other way to size the CPU tier than cpuBlocks, and remoteSecretFile the other way to give
    // the remote secret than remoteSecret: neither can be given with the other.
    const every: Required<Omit<EngineConfigInput, 'cpuBytes' | 'remoteSecretFile'>> = {
      model: 'small', tp: 2, backend: 'host', layout: 'per-layer', blockSize: 32, gpuBlocks: 64, offload: true, cpuBlocks: 128,
      offloadFactor: 2, eviction: 'arc', storePolicy: 'reuse:3', maxNumBatchedTokens: 512, maxNumSeqs: 8, maxModelLen: 1024,
      enableChunkedPrefill: true, enablePrefixCaching: false, failurePolicy: 'fail', faults: 'delay:ms=1', faultSeed: 7, rankRestart: true,
      stepDeadlineMs: 5000, startDeadlineMs: 6000, computeNsPerToken: 10, copyMethod: 'dma', gpu: 'a100-80gb',
      remote: 'redis://user:secret@127.0.0.1:7000', remotePolicy: 'write-back', remoteTimeoutMs: 900, remoteWriteAttempts: 5, remoteRetryBackoffMs: 40, remoteNamespace: 'fleet-a',
      remoteSecret: 'sixteen-or-more-bytes', remoteEncrypt: true,
    };
    const { model, computeNsPerToken, remote, remotePolicy, remoteTimeoutMs, remoteWriteAttempts, remoteRetryBackoffMs, remoteNamespace, remoteSecret, remoteEncrypt, ...rest } = every;
    expect(resolveEngineConfig(every)).toMatchObject({
      ...rest,
      model: { ...MODEL_PRESETS[model as 'small'], computeNsPerToken },
      remote: {
        url: remote, policy: remotePolicy, timeoutMs: remoteTimeoutMs, retry: { writeAttempts: remoteWriteAttempts, backoffMs: remoteRetryBackoffMs },
        namespace: remoteNamespace, secret: Buffer.from(remoteSecret), encrypt: remoteEncrypt,
      },
    });
  });
});

describe('names the library does not know', () => {
  it('an unknown key or model preset is refused naming it', () => {
    expect(engineRefusal({ gpu_blocks: 8 })).toBe('invalid engine config: unknown key "gpu_blocks"');
    expect(engineRefusal({ model: 'gpt5' })).toBe(
      'invalid engine config: model: invalid value "gpt5": expected a model preset (tiny, small, llama-8b, qwen-7b, llama-70b) or a model shape',
    );
  });
});

describe('the store policy grammar', () => {
  const sweepRefusal = (name: string) => refusal(() => parseSweepPolicy(`lru/${name}`));

  it.each(['on-compute', 'on-evict', 'reuse:1', 'reuse:12'])('%s is accepted by the library, kvtier run and the sweep', (name) => {
    expect(resolveEngineConfig({ storePolicy: name as EngineConfigInput['storePolicy'] }).storePolicy).toBe(name);
    expect(parseRunArgs(['--store-policy', name]).storePolicy).toBe(name);
    expect(parseSweepPolicy(`lru/${name}`).storePolicy).toBe(name);
  });

  it.each(['reuse:0', 'reuse:', 'reuse:01', 'reuse:1.5', 'ON-EVICT', 'always'])('%s is refused by the library, kvtier run and the sweep', (name) => {
    const expected = 'expected on-compute, on-evict or reuse:K with K >= 1';
    expect(engineRefusal({ storePolicy: name })).toBe(`invalid engine config: storePolicy: invalid value ${JSON.stringify(name)}: ${expected}`);
    expect(runRefusal('--store-policy', name)).toBe(`--store-policy: invalid value ${JSON.stringify(name)}: ${expected}`);
    expect(sweepRefusal(name)).toMatch(/storePolicy must be/);
  });
});

describe("kvtier run's defaults", () => {
  /** The engine configuration `kvtier run` with no flags asks for, resolved. */
  const runDefaults = (): EngineConfig => resolveEngineConfig(toEngineConfig(resolveRunConfig(parseRunArgs([]), 0), { offload: true }));

  it("are the engine's own, except the pool sizes it chooses for its workload and the rank count", () => {
    const run = runDefaults();
    const engine = resolveEngineConfig({ cpuBlocks: run.cpuBlocks, gpuBlocks: run.gpuBlocks, tp: run.tp, backend: run.backend });
    expect(run).toEqual(engine);
    expect(run.gpuBlocks).not.toBe(resolveEngineConfig({}).gpuBlocks);
  });
});
