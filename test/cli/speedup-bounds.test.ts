import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parseRunArgs } from '../../src/cli/run-config.js';
import { createRunWorkload } from '../../src/cli/run-workload.js';
import { sweepCommand } from '../../src/cli/sweep-command.js';
import { parseSweepArgs } from './sweep-args.js';
import { loadTrace } from '../../src/workload/trace.js';
import { TraceWorkload } from '../../src/workload/trace-workload.js';

/**
 * One bound on --speedup for every command that replays a trace by its
 * arrivals: the slice's last arrival must come within the longest wait a
 * timer can express, or the replay would never end.
 */

/** Two requests an hour apart. */
const TRACE = join(mkdtempSync(join(tmpdir(), 'kvtier-speedup-')), 'trace.jsonl');
writeFileSync(
  TRACE,
  ['{"timestamp": 0, "input_length": 64, "output_length": 2, "hash_ids": [1]}', '{"timestamp": 3600000, "input_length": 64, "output_length": 2, "hash_ids": [2]}', ''].join('\n'),
);

const FAR = (speedup: string) => new RegExp(`trace\\.jsonl:2: this request would arrive .* days into the replay \\(--speedup ${speedup.replace('.', '\\.')}\\).*raise --speedup`);

async function message(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (error) {
    return (error as Error).message;
  }
  return 'accepted';
}

describe.each(['0.001', '1e-9'])('--speedup %s over an hour of arrivals', (speedup) => {
  it('is refused by kvtier run', async () => {
    const config = parseRunArgs(['--trace', TRACE, '--speedup', speedup]);
    expect(await message(() => createRunWorkload(config.workload, { vocabSize: 100, maxModelLen: null }))).toMatch(FAR(speedup));
  });

  it('is refused by kvtier sweep --engine before any point runs, in the same words', async () => {
    const options = parseSweepArgs(['--trace', TRACE, '--engine', '--speedup', speedup, '--cpu-blocks', '16']);
    const out = new PassThrough();
    expect(await message(() => sweepCommand(options, out, out))).toMatch(FAR(speedup));
  });

  it('is refused by every trace replay (bench e2e and the library)', async () => {
    const trace = await loadTrace(TRACE, {});
    expect(() => new TraceWorkload(trace, { vocabSize: 100, speedup: Number(speedup) })).toThrow(FAR(speedup));
    expect(() => new TraceWorkload(trace, { vocabSize: 100, speedup: Number(speedup), arrivals: false })).not.toThrow();
  });
});
