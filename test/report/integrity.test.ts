import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { checkOutputs, toIntegrityItem, type IntegrityItem } from '../../src/report/integrity-check.js';
import { IntegrityChecker, IntegrityWorkerMissingError, integrityWorkerPath } from '../../src/report/integrity.js';
import type { FinishedRequest } from '../../src/runtime/engine-types.js';
import { TINY, corrupted, finishedRequest } from '../cli/finished-requests.js';

function items(...finished: FinishedRequest[]): IntegrityItem[] {
  return finished.map((f) => {
    const item = toIntegrityItem(f);
    if (item === null) throw new Error(`${f.id} is not checkable`);
    return item;
  });
}

describe('the integrity check', () => {
  it('accepts outputs equal to the reference model', () => {
    expect(checkOutputs(TINY, items(finishedRequest({ id: 'a' }), finishedRequest({ id: 'bb', maxTokens: 3 })))).toEqual({ checked: 2, mismatches: [] });
  });

  it('reports the request and the first differing output index', () => {
    const good = finishedRequest({ id: 'good' });
    const bad = finishedRequest({ id: 'bad' });
    const result = checkOutputs(TINY, items(good, corrupted(bad, 3)));
    expect(result.checked).toBe(2);
    expect(result.mismatches).toEqual([{ id: 'bad', index: 3, expected: bad.outputTokens[3], actual: (bad.outputTokens[3] + 1) % TINY.vocabSize }]);
  });

  it('reports output that stopped early at the index of the first missing token', () => {
    const full = finishedRequest({ id: 'short' });
    const result = checkOutputs(TINY, items({ ...full, outputTokens: full.outputTokens.slice(0, 4) }));
    expect(result.mismatches).toEqual([{ id: 'short', index: 4, expected: full.outputTokens[4], actual: null }]);
  });

  it('catches a prompt token the engine saw differently', () => {
    const finished = finishedRequest({ id: 'p' });
    const prompt = Int32Array.from(finished.promptTokens);
    prompt[0] = (prompt[0] + 1) % TINY.vocabSize;
    expect(checkOutputs(TINY, items({ ...finished, promptTokens: prompt })).mismatches).toHaveLength(1);
  });

  it('checks only requests that ran to completion', () => {
    expect(toIntegrityItem(finishedRequest({ id: 'x', finishReason: 'aborted' }))).toBeNull();
    expect(toIntegrityItem(finishedRequest({ id: 'x', finishReason: 'error' }))).toBeNull();
    expect(toIntegrityItem(finishedRequest({ id: 'x', finishReason: 'stopped' }))).not.toBeNull();
  });

  it('refuses to start without the compiled worker, saying how to build it', () => {
    expect(() => new IntegrityChecker(TINY, { workerFile: '/nonexistent/integrity-worker.js' })).toThrow(IntegrityWorkerMissingError);
    expect(() => new IntegrityChecker(TINY, { workerFile: '/nonexistent/integrity-worker.js' })).toThrow(/npm run build:ts/);
  });
});

// `npm test` builds dist first; a bare `vitest run` without a build skips this.
describe.skipIf(!existsSync(integrityWorkerPath()))('the integrity worker pool', () => {
  it('checks batches in worker threads and finds the corrupted request', async () => {
    const checker = new IntegrityChecker(TINY, { threads: 2, batchWork: 20_000 });
    const requests = Array.from({ length: 40 }, (_, i) => finishedRequest({ id: `r${i}`, seed: i }));
    requests[17] = corrupted(requests[17], 2);
    for (const request of requests) checker.add(request);
    checker.add(finishedRequest({ id: 'gone', finishReason: 'aborted' }));
    const summary = await checker.finish();
    expect(summary).toMatchObject({ checked: 40, mismatches: 1, skipped: 1 });
    expect(summary.examples).toEqual([expect.objectContaining({ id: 'r17', index: 2 })]);
  });
});
