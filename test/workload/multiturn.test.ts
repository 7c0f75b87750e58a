import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/errors.js';
import type { FinishReason, FinishedRequest } from '../../src/runtime/engine-types.js';
import { MultiturnWorkload, type MultiturnOptions } from '../../src/workload/multiturn.js';
import type { ArrivingRequest } from '../../src/workload/workload.js';

const VOCAB = 500;

function workload(options: Partial<MultiturnOptions> = {}): MultiturnWorkload {
  return new MultiturnWorkload({
    vocabSize: VOCAB,
    requests: 6,
    rounds: 3,
    systemPromptTokens: 32,
    userTurnTokens: { min: 4, max: 12 },
    outputTokens: { min: 2, max: 5 },
    thinkTimeMs: { min: 100, max: 200 },
    conversationStaggerMs: 10,
    ...options,
  });
}

/** Outputs that a model might give: deterministic, within the vocabulary. */
function answer(request: ArrivingRequest, reason: FinishReason = 'length'): FinishedRequest {
  const outputTokens = Array.from({ length: request.spec.maxTokens }, (_, i) => (request.spec.promptTokens.length * 7 + i) % VOCAB);
  return {
    id: request.spec.id,
    promptTokens: Int32Array.from(request.spec.promptTokens),
    outputTokens,
    maxTokens: request.spec.maxTokens,
    seed: request.spec.seed ?? 0,
    stopToken: null,
    finishReason: reason,
    errorMessage: null,
    arrivalMs: request.arrivalMs,
    firstScheduledMs: request.arrivalMs,
    firstTokenMs: request.arrivalMs + 1,
    finishMs: request.arrivalMs + 2,
    numPreemptions: 0,
    gpuPrefixHitTokens: 0,
    cpuTierHitTokens: 0,
    remoteHitTokens: 0,
    gpuPrefixRereadTokens: 0,
    cpuTierRereadTokens: 0,
  };
}

/** Serves every request instantly at its arrival time until the workload is done. */
function serveAll(w: MultiturnWorkload): ArrivingRequest[] {
  const served: ArrivingRequest[] = [];
  while (!w.done()) {
    const now = w.nextArrivalMs();
    if (now === null) throw new Error('workload neither done nor pending');
    for (const request of w.takeDue(now)) {
      served.push(request);
      w.onFinished(answer(request), now + 1);
    }
  }
  return served;
}

const tokensOf = (r: ArrivingRequest): number[] => Array.from(r.spec.promptTokens);

describe('the multi-turn workload', () => {
  it('starts every conversation with the shared system prompt, staggered', () => {
    const w = workload();
    const firsts = w.takeDue(1000);
    expect(firsts.map((r) => [r.spec.id, r.arrivalMs])).toEqual([
      ['mt-c0-r0', 0],
      ['mt-c1-r0', 10],
    ]);
    expect(tokensOf(firsts[0]).slice(0, 32)).toEqual(tokensOf(firsts[1]).slice(0, 32));
    expect(tokensOf(firsts[0])).not.toEqual(tokensOf(firsts[1]));
  });

  it('builds round r+1 from round r prompt, its actual outputs and a new user turn', () => {
    const w = workload();
    const [first] = w.takeDue(0);
    const finished = answer(first);
    w.onFinished(finished, 50);
    const [second] = w.takeDue(1e9).filter((r) => r.spec.id === 'mt-c0-r1');
    const history = [...tokensOf(first), ...finished.outputTokens];
    expect(tokensOf(second).slice(0, history.length)).toEqual(history);
    expect(second.spec.promptTokens.length - history.length).toBeGreaterThanOrEqual(4);
    expect(second.spec.promptTokens.length - history.length).toBeLessThanOrEqual(12);
  });

  it('schedules the next round a think time after the previous one finished', () => {
    const w = workload();
    const [first] = w.takeDue(0);
    w.onFinished(answer(first), 50);
    const next = w.takeDue(1e9).find((r) => r.spec.id === 'mt-c0-r1');
    expect(next?.arrivalMs).toBeGreaterThanOrEqual(150);
    expect(next?.arrivalMs).toBeLessThanOrEqual(250);
  });

  it('issues exactly the requested number of requests, with histories that only grow', () => {
    const served = serveAll(workload({ requests: 7, rounds: 3 }));
    expect(served).toHaveLength(7);
    expect(served.filter((r) => r.spec.id.startsWith('mt-c2-'))).toHaveLength(1);
    for (const c of [0, 1]) {
      const rounds = served.filter((r) => r.spec.id.startsWith(`mt-c${c}-`));
      expect(rounds.map((r) => r.spec.id)).toEqual([`mt-c${c}-r0`, `mt-c${c}-r1`, `mt-c${c}-r2`]);
      for (let r = 1; r < rounds.length; r++) {
        const previous = tokensOf(rounds[r - 1]);
        expect(tokensOf(rounds[r]).slice(0, previous.length)).toEqual(previous);
      }
    }
  });

  it('is deterministic for a seed and different across seeds', () => {
    const ids = (rs: ArrivingRequest[]) => rs.map((r) => [r.spec.id, tokensOf(r), r.spec.maxTokens, r.spec.seed]);
    expect(ids(serveAll(workload({ seed: 5 })))).toEqual(ids(serveAll(workload({ seed: 5 }))));
    expect(ids(serveAll(workload({ seed: 5 })))).not.toEqual(ids(serveAll(workload({ seed: 6 }))));
  });

  it('keeps token ids in the vocabulary and output budgets in range', () => {
    for (const request of serveAll(workload({ requests: 30 }))) {
      expect(Math.max(...tokensOf(request))).toBeLessThan(VOCAB);
      expect(request.spec.maxTokens).toBeGreaterThanOrEqual(2);
      expect(request.spec.maxTokens).toBeLessThanOrEqual(5);
    }
  });

  it('ends a conversation whose round failed', () => {
    const w = workload({ requests: 3, rounds: 3 });
    const [first] = w.takeDue(0);
    w.onFinished(answer(first, 'error'), 5);
    expect(w.done()).toBe(true);
  });

  it('ends a conversation before its context would exceed the limit', () => {
    const served = serveAll(workload({ requests: 10, rounds: 10, maxContextTokens: 80 }));
    expect(served.length).toBeLessThan(10);
    for (const request of served) expect(request.spec.promptTokens.length + request.spec.maxTokens).toBeLessThanOrEqual(80);
  });

  it('is not done while a request is pending or in the engine', () => {
    const w = workload({ requests: 1, rounds: 1 });
    expect(w.done()).toBe(false);
    const [only] = w.takeDue(0);
    expect(w.done()).toBe(false);
    w.onFinished(answer(only), 1);
    expect(w.done()).toBe(true);
  });

  it('rejects a request it never issued', () => {
    const w = workload();
    expect(() => w.onFinished({ id: 'other' } as FinishedRequest, 0)).toThrow(/"other" was not issued/);
  });

  it('names the bad option', () => {
    expect(() => workload({ userTurnTokens: { min: 9, max: 3 } })).toThrow(ConfigError);
    expect(() => workload({ userTurnTokens: { min: 9, max: 3 } })).toThrow(
      'multiturn workload: userTurnTokens: invalid value {"min":9,"max":3}: min must not exceed max',
    );
    expect(() => workload({ rounds: 0 })).toThrow(/^multiturn workload: rounds: invalid value 0: /);
  });
});
