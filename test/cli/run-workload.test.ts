import { describe, expect, it } from 'vitest';
import { parseRunArgs } from '../../src/cli/run-config.js';
import { createRunWorkload } from '../../src/cli/run-workload.js';
import { UsageError } from '../../src/cli/usage-error.js';
import { MultiturnWorkload } from '../../src/workload/multiturn.js';
import { TraceWorkload } from '../../src/workload/trace-workload.js';
import { traceLine, writeTraceFile } from '../workload/trace-files.js';

describe('the workload of a run', () => {
  it('is the multiturn generator by default, sized by --requests', async () => {
    const workload = await createRunWorkload(parseRunArgs(['--requests', '12', '--rounds', '4']).workload, { vocabSize: 100, maxModelLen: null });
    expect(workload).toBeInstanceOf(MultiturnWorkload);
    expect(workload.plannedRequests).toBe(12);
    expect(workload.takeDue(1e9)).toHaveLength(3);
  });

  it('is a trace replay sliced and scaled as the flags say', async () => {
    const file = writeTraceFile([traceLine(0, 1024, 64, [1, 2]), traceLine(2000, 512, 8, [1]), traceLine(9000, 100, 4, [3])]);
    const config = parseRunArgs(['--trace', file, '--time-window', '0:5', '--token-scale', '8', '--speedup', '2']);
    const workload = await createRunWorkload(config.workload, { vocabSize: 100, maxModelLen: null });
    expect(workload).toBeInstanceOf(TraceWorkload);
    const requests = workload.takeDue(1e9);
    expect(requests.map((r) => [r.arrivalMs, r.spec.promptTokens.length, r.spec.maxTokens])).toEqual([
      [0, 128, 8],
      [1000, 64, 1],
    ]);
  });

  it('refuses a trace slice with no requests in it', async () => {
    const file = writeTraceFile([traceLine(0, 100, 4, [1])]);
    const config = parseRunArgs(['--trace', file, '--time-window', '60:']);
    await expect(createRunWorkload(config.workload, { vocabSize: 100, maxModelLen: null })).rejects.toThrow(
      new UsageError(`${file}: no requests to replay in --time-window 60:`),
    );
  });

  it('refuses a trace whose request exceeds the engine limit, naming its line, before anything runs', async () => {
    const file = writeTraceFile([traceLine(0, 100, 4, [1]), traceLine(10, 1024, 64, [1, 2])]);
    const config = parseRunArgs(['--trace', file, '--token-scale', '2']);
    await expect(createRunWorkload(config.workload, { vocabSize: 100, maxModelLen: 512 })).rejects.toThrow(
      new UsageError(
        `${file}:2: input_length + output_length is 544 tokens after --token-scale 2, over the engine's limit of 512 ` +
          '(raise --gpu-blocks or --max-model-len, or replay with a larger --token-scale)',
      ),
    );
    await expect(createRunWorkload(config.workload, { vocabSize: 100, maxModelLen: 544 })).resolves.toBeInstanceOf(TraceWorkload);
  });
});
