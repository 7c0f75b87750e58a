import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { benchCommand } from '../../src/cli/bench.js';
import { parseRunArgs } from '../../src/cli/run-config.js';
import { parseSweepArgs } from './sweep-args.js';
import { namedFlagInput } from '../../src/cli/config-input.js';

/**
 * Every command refuses, before it runs, output files that name one of its
 * inputs or one another, however the path is spelled: nothing is overwritten
 * and no report is lost.
 */

const dir = mkdtempSync(join(tmpdir(), 'kvtier-outputs-'));
const TRACE = join(dir, 'trace.jsonl');
const TRACE_TEXT = '{"timestamp": 0, "input_length": 1024, "output_length": 8, "hash_ids": [1, 2]}\n';
writeFileSync(TRACE, TRACE_TEXT);
const OUT = join(dir, 'out.txt');
/** The same file as OUT, spelled through the current directory. */
const DOT_OUT = `./${relative(process.cwd(), OUT)}`;
const LINK = join(dir, 'link.txt');
symlinkSync(OUT, LINK);

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return (error as Error).message;
  }
  return 'accepted';
}

async function asyncRefusal(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (error) {
    return (error as Error).message;
  }
  return 'accepted';
}

describe('kvtier sweep', () => {
  it.each(['json', 'html', 'svg'])('refuses --%s naming its trace, also as ./X', (flag) => {
    expect(refusal(() => parseSweepArgs(['--trace', TRACE, `--${flag}`, TRACE]))).toMatch(new RegExp(`^--${flag} .*trace\\.jsonl: --trace .*is the same file, an input`));
    const dotTrace = `./${relative(process.cwd(), TRACE)}`;
    expect(refusal(() => parseSweepArgs(['--trace', TRACE, `--${flag}`, dotTrace]))).toMatch(/is the same file, an input/);
    expect(readFileSync(TRACE, 'utf8')).toBe(TRACE_TEXT);
  });

  it('refuses two outputs naming one file, however spelled, naming both flags', () => {
    expect(refusal(() => parseSweepArgs(['--trace', TRACE, '--json', OUT, '--html', OUT]))).toBe(`--html ${OUT}: --json ${OUT} is the same file; give each output a file of its own`);
    expect(refusal(() => parseSweepArgs(['--trace', TRACE, '--json', OUT, '--svg', DOT_OUT]))).toMatch(/^--svg .*out\.txt: --json .*out\.txt is the same file/);
    expect(refusal(() => parseSweepArgs(['--trace', TRACE, '--html', LINK, '--svg', OUT]))).toMatch(/^--svg .*: --html .*link\.txt is the same file/);
  });

  it('accepts outputs of their own', () => {
    expect(refusal(() => parseSweepArgs(['--trace', TRACE, '--json', join(dir, 'a.json'), '--html', join(dir, 'a.html'), '--svg', join(dir, 'a.svg')]))).not.toMatch(/same file/);
  });
});

describe('kvtier run', () => {
  it('refuses --html and --json naming one file, however spelled', () => {
    expect(refusal(() => parseRunArgs(['--html', OUT, '--json', OUT]))).toBe(`--html ${OUT}: --json ${OUT} is the same file; give each output a file of its own`);
    expect(refusal(() => parseRunArgs(['--html', OUT, '--json', DOT_OUT]))).toMatch(/^--html .*: --json .* is the same file/);
  });
});

describe('kvtier bench', () => {
  it('refuses --json and --markdown naming one file, and an output naming its trace', async () => {
    expect(await asyncRefusal(() => benchCommand('scheduler', namedFlagInput({ json: OUT, markdown: DOT_OUT })))).toMatch(/^--markdown .*: --json .* is the same file/);
    expect(await asyncRefusal(() => benchCommand('share', namedFlagInput({ trace: TRACE, json: TRACE })))).toMatch(/^--json .*trace\.jsonl: --trace .* is the same file, an input/);
    expect(readFileSync(TRACE, 'utf8')).toBe(TRACE_TEXT);
  });
});
