import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectUsageFailure, kvtier, scratchDir, scratchFile } from './cli.js';

/**
 * Bad input ends the CLI with exit code 2 and one `kvtier: ...` line naming
 * the problem, before any work is done (nothing on stdout: no progress line,
 * no report).
 */

function configFile(settings: unknown): string {
  return scratchFile('run.json', typeof settings === 'string' ? settings : JSON.stringify(settings));
}

/** A Mooncake trace line; `fields` overrides or removes (undefined) fields of a valid one. */
function traceLine(fields: Record<string, unknown> = {}): string {
  const valid: Record<string, unknown> = { timestamp: 0, input_length: 600, output_length: 4, hash_ids: [1, 2] };
  return JSON.stringify({ ...valid, ...fields });
}

function traceFile(...lines: string[]): string {
  return scratchFile('bad.jsonl', `${lines.join('\n')}\n`);
}

async function usageError(args: readonly string[]): Promise<string> {
  return expectUsageFailure(await kvtier(args)).replace(/^kvtier: /, '');
}

describe.concurrent('bad flags', () => {
  it.each([
    [['run', '--bogus'], "unknown option '--bogus'"],
    [['run', '--gpu-block', '64'], "unknown option '--gpu-block' (Did you mean --gpu-blocks?)"],
    [['run', '--gpu-blocks', 'many'], '--gpu-blocks: invalid value "many": expected a positive integer'],
    [['run', '--tp', '3'], `--tp: invalid value "3": the tiny model's 4 KV heads must split evenly over the ranks`],
    [['run', '--block-size', '8192'], '--block-size: invalid value "8192": expected a positive integer up to 4096'],
    [['run', '--store-policy', 'sometimes'], '--store-policy: invalid value "sometimes": expected on-compute, on-evict or reuse:K with K >= 1'],
    [['run', '--max-requests', '5'], '--max-requests applies to trace replay only (add --trace FILE)'],
    [['run', '--compare', '--no-offload'], '--compare runs with offloading off and then on; drop --no-offload'],
    [['run', '--max-model-len', '100000'], /^--max-model-len: invalid value "100000": a request must fit the GPU KV cache/],
    [['run', '--faults', 'explode:rank=0'], /^--faults: invalid value "explode:rank=0": unknown fault kind 'explode'/],
    [['run', '--tp', '2', '--faults', 'crash:rank=3,step=1'], 'fault plan: crash: rank=3 but tp is 2'],
    [['run', '--model', 'llama-70b', '--cpu-bytes', '64TiB'], /^the llama-70b model's KV pools need .* of host memory .* but this machine has/],
    [['run', '--json', '/nonexistent-kvtier-folder/report.json'], '--json /nonexistent-kvtier-folder/report.json: cannot write there: its folder does not exist'],
    [['analyze'], "required option '--trace <file>' not specified"],
    [['bench', 'warp-speed'], /^bench: unknown kind "warp-speed"/],
    [['launch'], /^unknown command 'launch'/],
  ])('%j', async (args, message) => {
    expect(await usageError(args)).toMatch(message);
  });
});

describe.concurrent('bad config files', () => {
  it('an unknown key is named with its file', async () => {
    const file = configFile({ gpuBlocks: 64, gpu_blocks: 64 });
    expect(await usageError(['run', '--config', file])).toBe(`${file}: unknown key "gpu_blocks" (keys are the flags' camelCase names, e.g. "gpuBlocks")`);
  });

  it('a bad value is named with its key, file and value', async () => {
    const file = configFile({ cpuBytes: 'lots' });
    expect(await usageError(['run', '--config', file])).toBe(
      `key "cpuBytes" in ${file}: invalid value "lots": expected a size in bytes such as 4096, 512MiB, 2GiB or 1.5GB`,
    );
  });

  it('a file that is not JSON', async () => {
    expect(await usageError(['run', '--config', configFile('{"tp": 2,')])).toMatch(/^--config .*run\.json: invalid JSON: /);
  });

  it('a file that does not exist', async () => {
    const file = join(scratchDir(), 'missing.json');
    expect(await usageError(['run', '--config', file])).toBe(`--config ${file}: cannot read the file (ENOENT)`);
  });

  it('a path that is a folder', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvtier-cli-'));
    expect(await usageError(['run', '--config', folder])).toBe(`--config ${folder}: cannot read the file (EISDIR)`);
  });
});

describe.concurrent('bad traces', () => {
  it('a line that is not JSON is named by file and line number', async () => {
    const file = traceFile(traceLine(), 'timestamp: 5');
    expect(await usageError(['run', '--trace', file])).toMatch(new RegExp(`^${file}:2: invalid JSON: `));
  });

  it('a missing field', async () => {
    const file = traceFile(traceLine({ output_length: undefined }));
    expect(await usageError(['run', '--trace', file])).toBe(`${file}:1: field "output_length" is missing (expected an integer >= 0)`);
  });

  it('a field of the wrong type', async () => {
    const file = traceFile(traceLine(), traceLine(), traceLine({ timestamp: 'noon' }));
    expect(await usageError(['run', '--trace', file])).toBe(`${file}:3: field "timestamp": expected a number of milliseconds >= 0, got "noon"`);
  });

  it('hash ids that do not cover the prompt', async () => {
    const file = traceFile(traceLine({ hash_ids: [1] }));
    expect(await usageError(['run', '--trace', file])).toBe(
      `${file}:1: field "hash_ids": 1 ids for input_length 600, expected 2 (one per 512-token block)`,
    );
  });

  it('a request longer than the engine accepts', async () => {
    const file = traceFile(traceLine(), traceLine({ input_length: 2000, hash_ids: [1, 2, 3, 4] }));
    expect(await usageError(['run', '--trace', file, '--gpu-blocks', '64'])).toMatch(
      new RegExp(`^${file}:2: input_length \\+ output_length is 2004 tokens, over the engine's limit of 1024 `),
    );
  });

  it('a time window with no requests in it', async () => {
    const file = traceFile(traceLine({ timestamp: 5000 }));
    expect(await usageError(['run', '--trace', file, '--time-window', '10:'])).toBe(`${file}: no requests to replay in --time-window 10:`);
  });

  it('a trace file that does not exist, for run and analyze alike', async () => {
    const file = join(scratchDir(), 'missing.jsonl');
    expect(await usageError(['run', '--trace', file])).toBe(`trace file "${file}" cannot be read: ENOENT`);
    expect(await usageError(['analyze', '--trace', file])).toBe(`trace file "${file}" cannot be read: ENOENT`);
  });

  it('a trace path that is a folder', async () => {
    const folder = scratchDir();
    expect(await usageError(['run', '--trace', folder])).toBe(`trace file "${folder}" cannot be read: it is not a regular file`);
  });
});
