import { describe, expect, it } from 'vitest';
import type { FinishedRequest } from '../../src/runtime/engine-types.js';
import { loadTrace } from '../../src/workload/trace.js';
import { tracePromptTokens } from '../../src/workload/trace-tokens.js';
import { TraceWorkload } from '../../src/workload/trace-workload.js';
import { traceLine, writeTraceFile } from './trace-files.js';

const VOCAB = 1000;

async function replay(options: { speedup?: number; arrivals?: boolean; timeWindow?: [number, number] } = {}): Promise<TraceWorkload> {
  const file = writeTraceFile([traceLine(1000, 600, 4, [1, 2]), traceLine(3000, 300, 2, [1]), traceLine(5000, 100, 9, [3])]);
  const trace = await loadTrace(file, { timeWindow: options.timeWindow });
  return new TraceWorkload(trace, { vocabSize: VOCAB, speedup: options.speedup, arrivals: options.arrivals });
}

describe('trace replay', () => {
  it('releases requests at their timestamps', async () => {
    const workload = await replay();
    expect(workload.takeDue(999)).toEqual([]);
    expect(workload.nextArrivalMs()).toBe(1000);
    expect(workload.takeDue(3000).map((r) => r.arrivalMs)).toEqual([1000, 3000]);
    expect(workload.done()).toBe(false);
    expect(workload.takeDue(1e9).map((r) => r.spec.id)).toEqual(['trace-L3']);
    expect(workload.done()).toBe(true);
    expect(workload.nextArrivalMs()).toBeNull();
  });

  it('divides arrival times by the speedup', async () => {
    const workload = await replay({ speedup: 4 });
    expect(workload.takeDue(1e9).map((r) => r.arrivalMs)).toEqual([250, 750, 1250]);
  });

  it('submits everything at time zero without arrivals', async () => {
    const workload = await replay({ arrivals: false });
    expect(workload.takeDue(0)).toHaveLength(3);
  });

  it('measures arrivals from the start of the time window', async () => {
    const workload = await replay({ timeWindow: [2, 10] });
    expect(workload.takeDue(1e9).map((r) => r.arrivalMs)).toEqual([1000, 3000]);
  });

  it('hands out at most the requested number of due requests', async () => {
    const workload = await replay();
    expect(workload.takeDue(1e9, 2)).toHaveLength(2);
    expect(workload.takeDue(1e9, 2)).toHaveLength(1);
  });

  it('builds each request from its line: prompt from hash ids, output budget, seed', async () => {
    const workload = await replay();
    const [first] = workload.takeDue(1000);
    expect(first.spec).toEqual({
      id: 'trace-L1',
      promptTokens: tracePromptTokens([1, 2], 600, 512, VOCAB),
      maxTokens: 4,
      seed: 1,
    });
  });

  it('ignores finished requests: the replay is open loop', async () => {
    const workload = await replay();
    const [first] = workload.takeDue(1000);
    workload.onFinished({ id: first.spec.id } as FinishedRequest, 2000);
    expect(workload.nextArrivalMs()).toBe(3000);
  });

  it('rejects a speedup that is not positive', async () => {
    await expect(replay({ speedup: 0 })).rejects.toThrow(/speedup 0/);
  });
});
