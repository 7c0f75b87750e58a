import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONVERSATION_TRACE, expectUsageFailure, kvtier, scratchDir, scratchFile } from './cli.js';

/**
 * Input that is each valid on its own but cannot run, conflicts, or would
 * destroy an input is refused before anything runs: exit code 2, one
 * `kvtier: ...` line naming the flag, key, file or line, nothing on stdout,
 * no output file written. Every case runs the built CLI in its own process.
 */

/** A file in a fresh folder holding `text` (a string) or `value` as JSON. */
function file(name: string, content: unknown): string {
  return scratchFile(name, typeof content === 'string' ? content : JSON.stringify(content));
}

/** A Mooncake trace line; `fields` overrides fields of a valid one. */
function traceLine(fields: Record<string, unknown> = {}): string {
  return JSON.stringify({ timestamp: 0, input_length: 600, output_length: 4, hash_ids: [1, 2], ...fields });
}

function trace(...lines: string[]): string {
  return file('trace.jsonl', `${lines.join('\n')}\n`);
}

/** Runs `args` (a function: files are made per case) and returns the one stderr line without its prefix. */
async function refused(args: readonly string[]): Promise<string> {
  return expectUsageFailure(await kvtier(args)).replace(/^kvtier: /, '');
}

type Case = [string, () => string[], RegExp];

const BOM = '\ufeff';

const CASES: Case[] = [
  // Values the engine or a device would only fail on after starting work.
  ['compute time past the limit (flag)', () => ['run', '--compute-ns-per-token', '1e15'], /^--compute-ns-per-token: invalid value "1e15": expected an integer from 0 to 1000000000$/],
  ['compute time past the limit (config key)', () => ['run', '--config', file('run.json', { computeNsPerToken: 1e15 })], /^key "computeNsPerToken" in .*run\.json: invalid value 1000000000000000: expected an integer from 0 to 1000000000$/],
  ['a fault plan naming a block the pool lacks', () => ['run', '--gpu-blocks', '96', '--faults', 'load-fail:blocks=99999'], /^--faults: invalid value "load-fail:blocks=99999": load-fail: blocks=99999 is not a GPU block \(gpuBlocks is 96/],
  ['bench transfer with a tp that does not split the heads', () => ['bench', 'transfer', '--tp', '3'], /^bench transfer: --tp: invalid value "3": the tiny model's 4 KV heads must split evenly over the ranks$/],
  ['bench transfer larger than the machine', () => ['bench', 'transfer', '--total-bytes', '10TiB'], /^bench transfer: --total-bytes: invalid value "10TiB": the bench needs 40\.00 TiB of host memory/],
  ['bench transfer with a block past the engine limit', () => ['bench', 'transfer', '--block-tokens', '100000000'], /^bench transfer: --block-tokens: invalid value "100000000": expected .* up to 4096$/],
  ['bench e2e with a trace request longer than the engine accepts', () => ['bench', 'e2e', '--trace', CONVERSATION_TRACE, '--token-scale', '1', '--gpu-blocks', '64', '--max-requests', '2'], /conversation_trace\.jsonl:1: input_length \+ output_length is 7258 tokens after --token-scale 1, over the engine's limit of 1024/],
  ['a GPU pool past what the scheduler can track', () => ['run', '--block-size', '1', '--gpu-blocks', '60000000'], /^--gpu-blocks: invalid value "60000000": expected a positive integer up to 4194304$/],
  // Conflicting settings.
  ['--no-offload with --cpu-blocks', () => ['run', '--no-offload', '--cpu-blocks', '100'], /^--cpu-blocks sets up the CPU tier, but --no-offload turns it off/],
  ['--no-offload with --cpu-bytes', () => ['run', '--no-offload', '--cpu-bytes', '1MiB'], /^--cpu-bytes sets up the CPU tier, but --no-offload/],
  ['--no-offload with --eviction', () => ['run', '--no-offload', '--eviction', 'arc'], /^--eviction sets up the CPU tier, but --no-offload/],
  ['--no-offload with --store-policy', () => ['run', '--no-offload', '--store-policy', 'on-evict'], /^--store-policy sets up the CPU tier, but --no-offload/],
  ['--no-offload with --offload-factor', () => ['run', '--no-offload', '--offload-factor', '2'], /^--offload-factor sets up the CPU tier, but --no-offload/],
  ['"offload": false with "cpuBlocks" in a config file', () => ['run', '--config', file('run.json', { offload: false, cpuBlocks: 100 })], /^key "cpuBlocks" in .*run\.json sets up the CPU tier, but key "offload" in .*run\.json turns it off/],
  ['two deaths of one rank at one step', () => ['run', '--faults', 'crash:rank=1,step=3;hang:rank=1,step=3'], /^--faults: invalid value .*: crash and hang both end rank=1 at step=3/],
  ['a rank written in hex', () => ['run', '--faults', 'crash:rank=0x1,step=3'], /^--faults: invalid value "crash:rank=0x1,step=3": crash: rank=0x1 is not a number/],
  // A run that could serve nothing.
  ['a GPU cache too small for any request', () => ['run', '--gpu-blocks', '1', '--cpu-blocks', '16', '--requests', '4'], /^no multiturn request fits the engine's limit of 16 tokens .*raise --max-model-len, or --gpu-blocks/],
  ['a model length too small for any request', () => ['run', '--max-model-len', '100'], /^no multiturn request fits the engine's limit of 100 tokens/],
  // Output files.
  ['--json naming the config file itself', () => { const config = file('run.json', { requests: 2 }); writeFileSync(config, JSON.stringify({ requests: 2, json: config })); return ['run', '--config', config]; }, /^key "json" in .*run\.json: invalid value .*run\.json is an input of this run/],
  ['bench --json naming a folder', () => ['bench', 'scheduler', '--running', '16', '--steps', '5', '--json', scratchDir()], /^--json .*: cannot write there: it is not a regular file$/],
  ['bench --markdown in a missing folder', () => ['bench', 'scheduler', '--running', '16', '--steps', '5', '--markdown', join(scratchDir(), 'missing', 'out.md')], /^--markdown .*: cannot write there: its folder does not exist$/],
  // Arrivals past what a timer can wait.
  ['a speedup that sends arrivals past the timer limit', () => ['run', '--trace', trace(traceLine(), traceLine({ timestamp: 1000 })), '--speedup', '1e-320'], /trace\.jsonl:2: this request would arrive .* days into the replay \(--speedup 1e-320\).*raise --speedup/],
  ['an arrival more than 24.8 days out', () => ['run', '--trace', trace(traceLine(), traceLine({ timestamp: 30 * 86_400_000 }))], /trace\.jsonl:2: this request would arrive 30\.0 days into the replay/],
  // Files as users write them.
  ['a config file with a byte order mark is read (its bad value is what fails)', () => ['run', '--config', file('run.json', `${BOM}{"gpuBlocks": 0}`)], /^key "gpuBlocks" in .*run\.json: invalid value 0: expected a positive integer/],
  ['a trace with a byte order mark is read (its line 2 is what fails)', () => ['run', '--trace', trace(`${BOM}${traceLine()}`, traceLine({ output_length: -1 }))], /trace\.jsonl:2: field "output_length"/],
  ['a config file that is not JSON, without echoing it', () => ['run', '--config', file('run.json', 'hello\nworld, secret')], /^--config .*run\.json: invalid JSON: Unexpected token 'h'$/],
  ['a binary trace, without echoing its bytes', () => ['run', '--trace', file('trace.jsonl', '\u0000\u0001\u0002binary\n')], /trace\.jsonl:1: invalid JSON: Unexpected token '\\u0000'$/],
  ['a "__proto__" key', () => ['run', '--config', file('run.json', '{"__proto__": {"tp": 2}}')], /^.*run\.json: key "__proto__" is not a setting and is not allowed$/],
  ['a "constructor" key', () => ['run', '--config', file('run.json', '{"constructor": 1}')], /^.*run\.json: key "constructor" is not a setting and is not allowed$/],
  ['a timestamp that overflows to infinity', () => ['run', '--trace', trace(traceLine({ timestamp: 0 }).replace('"timestamp":0', '"timestamp":1e400'))], /trace\.jsonl:1: field "timestamp": expected a number of milliseconds >= 0, got a value that is not a finite number/],
  ['a CPU tier in bytes too small for one block', () => ['run', '--cpu-bytes', '1'], /^--cpu-bytes: invalid value "1": holds no offloaded block/],
  ['a number given as a string in a config file', () => ['run', '--config', file('run.json', { tp: '2' })], /^key "tp" in .*run\.json: invalid value "2": expected a number/],
  ['analyze --json naming its trace', () => { const t = trace(traceLine()); return ['analyze', '--trace', t, '--json', t]; }, /^--json: invalid value .*trace\.jsonl is an input of this run/],
  ['analyze on an empty slice', () => ['analyze', '--trace', CONVERSATION_TRACE, '--time-window', '100000000:'], /conversation_trace\.jsonl: no requests to analyze in --time-window 100000000:$/],
];

describe.concurrent('refused before anything runs', () => {
  it.each(CASES)('%s', async (_, args, message) => {
    expect(await refused(args())).toMatch(message);
  });

  it('--json naming the trace is refused and the trace is left as it was', async () => {
    const copy = join(scratchDir(), 'trace.jsonl');
    copyFileSync(CONVERSATION_TRACE, copy);
    const before = readFileSync(copy, 'utf8');
    expect(await refused(['run', '--trace', copy, '--max-requests', '2', '--json', copy])).toMatch(/^--json: invalid value .*trace\.jsonl is an input of this run/);
    expect(readFileSync(copy, 'utf8')).toBe(before);
  });

  it('a bad bench option writes no --json file', async () => {
    const json = join(scratchDir(), 'bench.json');
    expect(await refused(['bench', 'transfer', '--tp', '3', '--json', json])).toMatch(/--tp/);
    expect(existsSync(json)).toBe(false);
  });
});
