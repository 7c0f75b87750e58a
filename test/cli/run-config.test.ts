import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { ConfigError } from '../../src/core/errors.js';
import { MULTITURN_DEFAULTS } from '../../src/workload/multiturn.js';
import {
  RUN_DEFAULTS,
  UsageError,
  parseRunArgs,
  resolveRunConfig,
  toEngineConfig,
  type RunConfig,
} from '../../src/cli/run-config.js';
import { usageMessage } from './run-usage.js';

/** Writes a JSON config file and returns its path. */
function configFile(settings: unknown, name = 'run.json'): string {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-config-'));
  const file = join(dir, name);
  writeFileSync(file, typeof settings === 'string' ? settings : JSON.stringify(settings));
  return file;
}


describe('kvtier run defaults', () => {
  it('runs the multiturn workload on the tiny model with the CPU tier on', () => {
    const config = parseRunArgs([]);
    expect(config).toMatchObject({
      backend: 'auto',
      tp: 'auto',
      model: 'tiny',
      layout: 'cross-layer',
      blockSize: RUN_DEFAULTS.blockSize,
      gpuBlocks: RUN_DEFAULTS.gpuBlocks,
      cpuBlocks: RUN_DEFAULTS.cpuBlocks,
      cpuBytes: null,
      offload: true,
      eviction: 'classhold+queue',
      storePolicy: 'on-compute',
      compare: false,
      json: null,
      workload: { kind: 'multiturn', requests: MULTITURN_DEFAULTS.requests, rounds: MULTITURN_DEFAULTS.rounds, seed: MULTITURN_DEFAULTS.seed },
    });
  });

  it('gives the CPU tier more blocks than the GPU pool', () => {
    expect(RUN_DEFAULTS.cpuBlocks).toBeGreaterThan(RUN_DEFAULTS.gpuBlocks);
  });
});

describe('kvtier run flags', () => {
  it('reads engine and pool settings', () => {
    const config = parseRunArgs([
      '--backend', 'host', '--tp', '4', '--model', 'small', '--gpu-blocks', '300', '--cpu-blocks', '900',
      '--block-size', '32', '--offload-factor', '4', '--eviction', 'arc', '--store-policy', 'reuse:2',
      '--layout', 'per-layer', '--max-num-seqs', '8', '--max-batched-tokens', '2048', '--max-model-len', '4096',
      '--compute-ns-per-token', '0',
    ]);
    expect(config).toMatchObject({
      backend: 'host', tp: 4, model: 'small', gpuBlocks: 300, cpuBlocks: 900, blockSize: 32, offloadFactor: 4,
      eviction: 'arc', storePolicy: 'reuse:2', layout: 'per-layer', maxNumSeqs: 8, maxBatchedTokens: 2048,
      maxModelLen: 4096, computeNsPerToken: 0,
    });
  });

  it.each([
    ['512MiB', 512 * 2 ** 20],
    ['2GiB', 2 * 2 ** 30],
    ['1.5GB', 1.5e9],
    ['4096', 4096],
  ])('sizes the CPU tier in bytes from %s, replacing the default block count', (text, bytes) => {
    const config = parseRunArgs(['--cpu-bytes', text]);
    expect(config.cpuBytes).toBe(bytes);
    expect(config.cpuBlocks).toBeNull();
  });

  it('turns offloading off with --no-offload', () => {
    expect(parseRunArgs(['--no-offload']).offload).toBe(false);
  });

  it('reads fault, recovery and output settings', () => {
    const config = parseRunArgs([
      '--faults', 'load-fail:rank=0,p=0.1', '--fault-seed', '7', '--failure-policy', 'fail', '--rank-restart',
      '--step-deadline-ms', '5000', '--compare', '--json', 'out.json',
    ]);
    expect(config).toMatchObject({
      faults: 'load-fail:rank=0,p=0.1', faultSeed: 7, failurePolicy: 'fail', rankRestart: true, stepDeadlineMs: 5000,
      compare: true, json: 'out.json',
    });
  });

  it('sizes the multiturn workload', () => {
    expect(parseRunArgs(['--workload', 'multiturn', '--requests', '40', '--rounds', '4', '--seed', '9']).workload).toEqual({
      kind: 'multiturn', requests: 40, rounds: 4, seed: 9,
    });
  });

  it('replays a trace with its slicing, scaling and timing options', () => {
    const config = parseRunArgs([
      '--trace', 't.jsonl', '--max-requests', '500', '--time-window', '60:600', '--token-scale', '8', '--speedup', '2.5',
    ]);
    expect(config.workload).toEqual({
      kind: 'trace', file: 't.jsonl', maxRequests: 500, timeWindow: [60, 600], tokenScale: 8, speedup: 2.5, arrivals: true,
    });
  });

  it('accepts an open-ended time window and submission without arrivals', () => {
    const config = parseRunArgs(['--workload', 'trace', '--trace', 't.jsonl', '--time-window', '30:', '--no-arrivals']);
    expect(config.workload).toMatchObject({ timeWindow: [30, Infinity], arrivals: false });
  });

  it('lets help through as a commander exit with code 0', () => {
    let help = '';
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((help += String(chunk)), true));
    try {
      expect(() => parseRunArgs(['--help'])).toThrow(expect.objectContaining({ exitCode: 0 }));
    } finally {
      write.mockRestore();
    }
    expect(help).toMatch(/--time-window <start:end> +trace: replay requests arriving START\.\.END\s+seconds into the trace/);
  });
});

describe('kvtier run config files', () => {
  it('reads settings from a JSON file', () => {
    const file = configFile({ tp: 2, gpuBlocks: 64, cpuBytes: '1MiB', storePolicy: 'on-evict', startDeadlineMs: 5000 });
    expect(parseRunArgs(['--config', file])).toMatchObject({ tp: 2, gpuBlocks: 64, cpuBytes: 2 ** 20, cpuBlocks: null, offload: true, storePolicy: 'on-evict', startDeadlineMs: 5000 });
  });

  it('lets flags override the file', () => {
    const file = configFile({ gpuBlocks: 64, eviction: 'arc' });
    expect(parseRunArgs(['--gpu-blocks', '128', '--config', file])).toMatchObject({ gpuBlocks: 128, eviction: 'arc' });
  });

  it('takes a trace path in the file relative to the file', () => {
    const file = configFile({ trace: 'traces/t.jsonl', timeWindow: [0, 10] });
    const config = parseRunArgs(['--config', file]);
    expect(config.workload).toMatchObject({ kind: 'trace', file: join(file, '..', 'traces/t.jsonl'), timeWindow: [0, 10] });
  });

  it('takes the device trace path as deviceTrace, relative to the file, and names the key of a bad one', () => {
    const file = configFile({ deviceTrace: 'out/trace.json' });
    expect(parseRunArgs(['--config', file]).deviceTrace).toBe(join(file, '..', 'out/trace.json'));
    expect(parseRunArgs([]).deviceTrace).toBeNull();
    const empty = configFile({ deviceTrace: '' });
    expect(usageMessage(['--config', empty])).toBe(`key "deviceTrace" in ${empty}: invalid value "": expected an output file path`);
    const number = configFile({ deviceTrace: 3 });
    expect(usageMessage(['--config', number])).toBe(`key "deviceTrace" in ${number}: invalid value 3: expected an output file path`);
  });

  it('refuses a device trace written to the file of another output', () => {
    expect(usageMessage(['--json', 'out.json', '--device-trace', 'out.json'])).toBe(
      '--device-trace out.json: --json out.json is the same file; give each output a file of its own',
    );
  });

  it('rejects an unknown key, naming it and the file', () => {
    const file = configFile({ gpuBlocks: 8, gpu_blocks: 8 });
    expect(usageMessage(['--config', file])).toBe(`${file}: unknown key "gpu_blocks" (keys are the flags' camelCase names, e.g. "gpuBlocks")`);
  });

  it('names the key and file of a bad value', () => {
    const file = configFile({ tp: 'two' });
    expect(usageMessage(['--config', file])).toBe(`key "tp" in ${file}: invalid value "two": expected a positive integer`);
  });

  it('rejects a boolean written as a string', () => {
    const file = configFile({ offload: 'no' });
    expect(usageMessage(['--config', file])).toMatch(/key "offload" in .*: invalid value "no": expected true or false/);
  });

  it('rejects a file that is not JSON or not an object', () => {
    expect(usageMessage(['--config', configFile('{"tp": 2,')])).toMatch(/--config .*run\.json: invalid JSON/);
    expect(usageMessage(['--config', configFile([1, 2])])).toMatch(/expected a JSON object of settings/);
  });

  it('rejects a file that cannot be read', () => {
    expect(usageMessage(['--config', '/nonexistent/run.json'])).toMatch(/--config \/nonexistent\/run\.json: cannot read the file \(ENOENT\)/);
  });
});

describe('kvtier run bad flags', () => {
  it.each([
    [['--backend', 'gpu'], '--backend: invalid value "gpu": expected one of auto, host, cuda'],
    [['--tp', '0'], '--tp: invalid value "0": expected a positive integer'],
    [['--tp', '1.5'], '--tp: invalid value "1.5": expected a positive integer'],
    [['--tp', 'abc'], '--tp: invalid value "abc": expected a positive integer'],
    [['--tp', '3'], `--tp: invalid value "3": the tiny model's 4 KV heads must split evenly over the ranks`],
    [['--model', 'gpt5'], '--model: invalid value "gpt5": expected a model preset: tiny, small, llama-8b, qwen-7b, llama-70b'],
    [['--gpu-blocks', '-4'], '--gpu-blocks: invalid value "-4": expected a positive integer'],
    [['--cpu-blocks', '0'], '--cpu-blocks: invalid value "0": expected a positive integer'],
    [['--cpu-bytes', '2XB'], '--cpu-bytes: invalid value "2XB": expected a size in bytes such as 4096, 512MiB, 2GiB or 1.5GB'],
    [['--cpu-bytes', '0GiB'], '--cpu-bytes: invalid value "0GiB": expected a size in bytes such as 4096, 512MiB, 2GiB or 1.5GB'],
    [['--block-size', 'big'], '--block-size: invalid value "big": expected a positive integer'],
    [['--offload-factor', '0'], '--offload-factor: invalid value "0": expected a positive integer'],
    [['--eviction', 'fifo'], '--eviction: invalid value "fifo": expected one of lru, arc, lhd, s3fifo, hold, classhold, lru+queue, s3fifo+queue, hold+queue, classhold+queue'],
    [['--store-policy', 'reuse:0'], '--store-policy: invalid value "reuse:0": expected on-compute, on-evict or reuse:K with K >= 1'],
    [['--store-policy', 'always'], '--store-policy: invalid value "always": expected on-compute, on-evict or reuse:K with K >= 1'],
    [['--layout', 'flat'], '--layout: invalid value "flat": expected one of cross-layer, per-layer'],
    [['--workload', 'chat'], '--workload: invalid value "chat": expected one of multiturn, trace'],
    [['--requests', '0'], '--requests: invalid value "0": expected a positive integer'],
    [['--rounds', 'x'], '--rounds: invalid value "x": expected a positive integer'],
    [['--seed', '-1'], '--seed: invalid value "-1": expected an integer >= 0'],
    [['--trace', 't', '--max-requests', '0'], '--max-requests: invalid value "0": expected a positive integer'],
    [['--trace', 't', '--time-window', '600:60'], '--time-window: invalid value "600:60": expected START:END in seconds with 0 <= START < END (e.g. 0:600, 60:)'],
    [['--trace', 't', '--time-window', 'soon'], '--time-window: invalid value "soon": expected START:END in seconds with 0 <= START < END (e.g. 0:600, 60:)'],
    [['--trace', 't', '--token-scale', '3'], '--token-scale: invalid value "3": expected a whole divisor of the 512-token trace block (1, 2, 4, ..., 512)'],
    [['--trace', 't', '--speedup', '0'], '--speedup: invalid value "0": expected a number > 0'],
    [['--fault-seed', 'x'], '--fault-seed: invalid value "x": expected an integer >= 0'],
    [['--failure-policy', 'retry'], '--failure-policy: invalid value "retry": expected one of recompute, fail'],
    [['--step-deadline-ms', '0'], '--step-deadline-ms: invalid value "0": expected a positive integer'],
    [['--max-num-seqs', '0'], '--max-num-seqs: invalid value "0": expected a positive integer'],
    [['--max-batched-tokens', '1e-3'], '--max-batched-tokens: invalid value "1e-3": expected a positive integer'],
    [['--max-model-len', ''], '--max-model-len: invalid value "": expected a positive integer'],
    [['--compute-ns-per-token', '-1'], '--compute-ns-per-token: invalid value "-1": expected an integer >= 0'],
    [['--tp', '128'], '--tp: invalid value "128": expected a positive integer up to 64'],
    [['--block-size', '8192'], '--block-size: invalid value "8192": expected a positive integer up to 4096'],
    [['--offload-factor', '65'], '--offload-factor: invalid value "65": expected a positive integer up to 64'],
    [['--fault-seed', '4294967296'], '--fault-seed: invalid value "4294967296": expected an integer from 0 to 4294967295'],
    [['--faults', 'explode:rank=0'], `--faults: invalid value "explode:rank=0": unknown fault kind 'explode' (known: load-fail, store-fail, delay, stall, crash, hang, remote-fail, remote-down)`],
    [['--faults', 'delay:rank=0'], /^--faults: invalid value "delay:rank=0": delay: /],
  ])('%j is rejected naming the flag and value', (argv, message) => {
    if (typeof message === 'string') expect(usageMessage(argv)).toBe(message);
    else expect(usageMessage(argv)).toMatch(message);
  });

  it.each([
    [['--bogus'], "unknown option '--bogus'"],
    [['--gpu-block', '8'], "unknown option '--gpu-block' (Did you mean --gpu-blocks?)"],
    [['--tp'], "option '--tp <n>' argument missing"],
    [['extra'], /too many arguments/],
  ])('%j is a usage error from the flag parser', (argv, message) => {
    expect(usageMessage(argv)).toMatch(message);
  });

  it.each([
    [['--cpu-blocks', '8', '--cpu-bytes', '1GiB'], '--cpu-blocks and --cpu-bytes both size the CPU tier; give one'],
    [['--workload', 'trace'], '--workload trace needs --trace FILE'],
    [['--workload', 'multiturn', '--trace', 't'], '--trace replays a trace, but --workload asks for multiturn'],
    [['--max-requests', '5'], '--max-requests applies to trace replay only (add --trace FILE)'],
    [['--time-window', '0:5'], '--time-window applies to trace replay only (add --trace FILE)'],
    [['--token-scale', '2'], '--token-scale applies to trace replay only (add --trace FILE)'],
    [['--speedup', '2'], '--speedup applies to trace replay only (add --trace FILE)'],
    [['--no-arrivals'], '--no-arrivals applies to trace replay only (add --trace FILE)'],
    [['--trace', 't', '--requests', '5'], /--requests applies to the multiturn workload only/],
    [['--trace', 't', '--seed', '5'], /--seed applies to the multiturn workload only/],
    [['--trace', 't', '--speedup', '2', '--no-arrivals'], /--speedup and --no-arrivals do not go together/],
    [['--compare', '--no-offload'], '--compare runs with offloading off and then on; drop --no-offload'],
    [['--max-model-len', '20000', '--gpu-blocks', '1000'], '--max-model-len: invalid value "20000": a request must fit the GPU KV cache: 1000 blocks x 16 tokens = 16000 tokens'],
    [['--max-model-len', '600000'], /^--max-model-len: invalid value "600000": a request must fit the GPU KV cache: \d+ blocks x 16 tokens/],
  ])('%j is rejected as a bad combination', (argv, message) => {
    expect(usageMessage(argv)).toMatch(message);
  });

  it('names the file key when a combination comes from the file', () => {
    const file = configFile({ cpuBlocks: 8 });
    expect(usageMessage(['--config', file, '--cpu-bytes', '1GiB'])).toBe(`key "cpuBlocks" in ${file} and --cpu-bytes both size the CPU tier; give one`);
  });
});

describe('resolving the backend and rank count', () => {
  const defaults = (): RunConfig => parseRunArgs([]);

  it('uses the host backend with two ranks when there is no GPU', () => {
    expect(resolveRunConfig(defaults(), 0)).toMatchObject({ backend: 'host', tp: 2 });
  });

  it('uses cuda with one rank per GPU when GPUs are found', () => {
    expect(resolveRunConfig(defaults(), 2)).toMatchObject({ backend: 'cuda', tp: 2 });
  });

  it("lowers the rank count to one that divides the model's KV heads", () => {
    expect(resolveRunConfig(defaults(), 3)).toMatchObject({ backend: 'cuda', tp: 2 });
    expect(resolveRunConfig(defaults(), 8)).toMatchObject({ backend: 'cuda', tp: 4 });
  });

  it('keeps an explicit backend and rank count', () => {
    expect(resolveRunConfig(parseRunArgs(['--backend', 'host', '--tp', '4']), 8)).toMatchObject({ backend: 'host', tp: 4 });
  });

  it('refuses cuda without a device', () => {
    expect(() => resolveRunConfig(parseRunArgs(['--backend', 'cuda']), 0)).toThrow(ConfigError);
  });

  it('refuses a fault plan naming a rank the run will not have, once the rank count is known', () => {
    const config = parseRunArgs(['--faults', 'crash:rank=3,step=5']);
    expect(() => resolveRunConfig(config, 0)).toThrow(new UsageError('fault plan: crash: rank=3 but tp is 2'));
    expect(resolveRunConfig(config, 4)).toMatchObject({ backend: 'cuda', tp: 4 });
  });
});

describe('the engine configuration of a run', () => {
  it('carries the CPU tier settings when offloading is on', () => {
    const config = resolveRunConfig(parseRunArgs(['--cpu-bytes', '1GiB', '--eviction', 'arc', '--max-batched-tokens', '512']), 0);
    expect(toEngineConfig(config, { offload: true })).toEqual({
      model: 'tiny', tp: 2, backend: 'host', layout: 'cross-layer', blockSize: 16, gpuBlocks: RUN_DEFAULTS.gpuBlocks,
      offload: true, cpuBytes: 2 ** 30, offloadFactor: 1, eviction: 'arc', storePolicy: 'on-compute',
      failurePolicy: 'recompute', faultSeed: 0, rankRestart: false, maxNumBatchedTokens: 512,
    });
  });

  it('leaves the CPU tier out when offloading is off, as in the first half of --compare', () => {
    const engine = toEngineConfig(resolveRunConfig(parseRunArgs(['--compare']), 0), { offload: false });
    expect(engine.offload).toBe(false);
    expect(engine.cpuBlocks).toBeUndefined();
    expect(engine.cpuBytes).toBeUndefined();
  });

  it('uses the default CPU block count when no size is given', () => {
    expect(toEngineConfig(resolveRunConfig(parseRunArgs([]), 0), { offload: true }).cpuBlocks).toBe(RUN_DEFAULTS.cpuBlocks);
  });

  it('carries --copy-method to the engine, leaves the engine default without it, and refuses an unknown method', () => {
    const engine = (args: string[]) => toEngineConfig(resolveRunConfig(parseRunArgs(args), 0), { offload: true });
    expect(engine(['--copy-method', 'kernel']).copyMethod).toBe('kernel');
    expect(engine(['--copy-method', 'dma']).copyMethod).toBe('dma');
    expect(engine([]).copyMethod).toBeUndefined();
    expect(() => parseRunArgs(['--copy-method', 'fast'])).toThrow(
      new UsageError('--copy-method: invalid value "fast": expected one of kernel, dma, auto'),
    );
  });
});

describe('kvtier run KV event settings', () => {
  it('publish nowhere by default, and take the endpoint, topic, replay endpoint and encoding from flags', () => {
    expect(parseRunArgs([]).kvEvents).toBeNull();
    expect(
      parseRunArgs(['--kv-events-endpoint', 'tcp://*:5557', '--kv-events-topic', 'kv', '--kv-events-replay-endpoint', 'tcp://*:5558', '--kv-events-encoding', 'array']).kvEvents,
    ).toEqual({ endpoint: 'tcp://*:5557', topic: 'kv', replayEndpoint: 'tcp://*:5558', encoding: 'array' });
    expect(parseRunArgs(['--kv-events-endpoint', 'ipc:///tmp/kv']).kvEvents).toEqual({ endpoint: 'ipc:///tmp/kv', topic: '', replayEndpoint: null, encoding: 'map' });
  });

  it('refuse an endpoint that is not ZeroMQ, an unknown encoding, and settings without an endpoint, naming the flag', () => {
    expect(usageMessage(['--kv-events-endpoint', 'localhost:5557'])).toMatch(/^--kv-events-endpoint: invalid value "localhost:5557": expected a ZeroMQ endpoint/);
    expect(usageMessage(['--kv-events-endpoint', 'tcp://*:5557', '--kv-events-encoding', 'json'])).toMatch(/^--kv-events-encoding: invalid value "json"/);
    expect(usageMessage(['--kv-events-topic', 'kv'])).toBe('--kv-events-topic applies to KV events only (add --kv-events-endpoint ENDPOINT)');
  });
});
