import { CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { formatBytes, formatDecimalBytes, parseByteSize } from '../../src/core/byte-size.js';
import { cliExitFor } from '../../src/cli/exit-codes.js';
import { BenchOptions } from '../../src/cli/bench-options.js';
import { looseFlagInput, originOf } from '../../src/cli/config-input.js';
import { UsageError } from '../../src/cli/usage-error.js';
import { ConfigError, EngineError, RankError, TraceError } from '../../src/core/errors.js';

describe('byte sizes', () => {
  it.each([
    ['4096', 4096],
    ['10B', 10],
    ['512MiB', 512 * 2 ** 20],
    ['2GiB', 2 ** 31],
    ['1.5GB', 1.5e9],
    ['3 kb', 3000],
    ['1TiB', 2 ** 40],
  ])('reads %s', (text, bytes) => {
    expect(parseByteSize(text)).toBe(bytes);
  });

  it.each(['', 'GiB', '2 GiBs', '-1MiB', '1.5.2GB', '2XB'])('rejects %j', (text) => {
    expect(parseByteSize(text)).toBeNull();
  });

  it('renders sizes with binary units', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1.5 * 2 ** 30)).toBe('1.50 GiB');
  });

  it('renders sizes shown beside GB/s rates in powers of 1000', () => {
    expect(formatDecimalBytes(999)).toBe('999 B');
    expect(formatDecimalBytes(436_200)).toBe('436.2 kB');
    expect(formatDecimalBytes(34_200_000_000)).toBe('34.2 GB');
  });
});

describe('how the CLI exits on errors', () => {
  it.each([
    ['a bad flag', new UsageError('--tp: invalid value "x": expected a positive integer')],
    ['a bad config', new ConfigError('gpuBlocks: too small')],
    ['a bad trace line', new TraceError('t.jsonl', 3, 'invalid JSON')],
  ])('exits 2 with one kvtier: line for %s', (_what, err) => {
    expect(cliExitFor(err)).toEqual({ code: 2, message: `kvtier: ${err.message}` });
  });

  it('exits 2 for flags commander rejects, without its "error:" prefix', () => {
    const err = new CommanderError(1, 'commander.unknownOption', "error: unknown option '--x'");
    expect(cliExitFor(err)).toEqual({ code: 2, message: "kvtier: unknown option '--x'" });
  });

  it("keeps commander's suggestion on the same line", () => {
    const err = new CommanderError(1, 'commander.unknownOption', "error: unknown option '--gpu-block'\n(Did you mean --gpu-blocks?)");
    expect(cliExitFor(err)).toEqual({ code: 2, message: "kvtier: unknown option '--gpu-block' (Did you mean --gpu-blocks?)" });
  });

  it('exits 0 after help or version output, printing nothing more', () => {
    expect(cliExitFor(new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)'))).toEqual({ code: 0, message: null });
  });

  it('exits 1 for failures of the run, with the error code', () => {
    expect(cliExitFor(new RankError(1, 'missed the step deadline'))).toEqual({
      code: 1,
      message: 'kvtier: rank 1 failed: missed the step deadline (ERR_KVTIER_RANK)',
    });
    expect(cliExitFor(new EngineError('stopped')).code).toBe(1);
    expect(cliExitFor(new Error('boom')).message).toMatch(/^kvtier: unexpected failure: Error: boom/);
  });
});

describe('bench options', () => {
  it('reads values, key=value pairs and bare flags in camelCase', () => {
    const input = looseFlagInput(['--blocks', '64', '--kv-layout=per-layer', '--json', '--requests', '256']);
    expect(input.values).toEqual({
      blocks: '64',
      kvLayout: 'per-layer',
      json: true,
      requests: '256',
    });
    expect(originOf(input, 'kvLayout')).toBe('--kv-layout');
  });

  it('rejects a stray argument', () => {
    expect(() => looseFlagInput(['transfer'])).toThrow(UsageError);
  });

  it.each([
    [['--repeats', 'x'], 'bench transfer: --repeats: invalid value "x": expected an integer >= 1'],
    [['--repeats'], 'bench transfer: --repeats: invalid value true: expected an integer >= 1'],
    [['--arrivals', 'maybe'], 'bench transfer: --arrivals: invalid value "maybe": expected true or false'],
    [['--models', 'tiny,huge'], 'bench transfer: --models: invalid value "tiny,huge": expected a comma-separated list of tiny, large'],
  ] as const)('refuses %j naming the flag, the value and what it expects', (args, message) => {
    const options = new BenchOptions('transfer', looseFlagInput(args));
    expect(() => {
      options.int('repeats', 5);
      options.flag('arrivals', true);
      options.list('models', ['tiny', 'large'] as const, ['tiny']);
    }).toThrow(message);
  });

  it('refuses an option the bench did not read, by its flag', () => {
    const options = new BenchOptions('transfer', looseFlagInput(['--repeat-count', '3']));
    options.int('repeats', 5);
    expect(() => options.finish()).toThrow('bench transfer: unknown option --repeat-count');
  });
});
