import { describe, expect, it } from 'vitest';
import { TINY } from '../support/tiny.js';
import { rankDigest, referenceGenerate } from '../../src/model/reference.js';
import { KVOutputAggregator } from '../../src/runtime/aggregator.js';
import {
  NO_TOKEN,
  type JobResult,
  type KVConnectorOutput,
  type RankStepOutput,
  type ScheduledRequest,
  type SchedulerOutput,
} from '../../src/protocol/step-protocol.js';


function stepOf(step: number, requests: ScheduledRequest[] = []): SchedulerOutput {
  return {
    step,
    requests,
    totalScheduledTokens: requests.reduce((n, r) => n + r.tokens.length, 0),
    preemptedReqIds: [],
    finishedReqIds: [],
    offload: null,
  };
}

function rankOutput(rank: number, step: number, connector: Partial<KVConnectorOutput> = {}, digests: [string, number][] = []): RankStepOutput {
  return {
    rank,
    step,
    sampledReqIds: digests.map(([id]) => id),
    digests: digests.map(([, d]) => d),
    connector: { finishedJobs: [], finishedSending: [], finishedRecving: [], invalidBlockIds: [], ...connector },
    stepMs: 1,
    forwardMs: 1,
  };
}

function job(jobId: number, ok = true, failedGpuBlockIds: number[] = [], bytes = 100): JobResult {
  return { jobId, direction: ok && failedGpuBlockIds.length === 0 ? 'gpuToCpu' : 'cpuToGpu', ok, failedGpuBlockIds, bytes, elapsedMs: bytes / 100 };
}

describe('KVOutputAggregator', () => {
  it('finishes a job only when every rank reported it, possibly across steps', () => {
    const agg = new KVOutputAggregator(2, TINY.vocabSize);
    const first = agg.aggregate([rankOutput(0, 1, { finishedJobs: [job(7)] }), rankOutput(1, 1)], stepOf(1));
    expect(first.finishedJobs).toEqual([]);
    expect(agg.pendingJobIds()).toEqual([7]);
    const second = agg.aggregate([rankOutput(0, 2), rankOutput(1, 2, { finishedJobs: [job(7)] })], stepOf(2));
    expect(second.finishedJobs.map((j) => j.jobId)).toEqual([7]);
    expect(second.finishedJobs[0].bytes).toBe(200);
    expect(agg.pendingJobIds()).toEqual([]);
  });

  it('fails a job when any rank part failed, and unions the failed blocks', () => {
    const agg = new KVOutputAggregator(3, TINY.vocabSize);
    const out = agg.aggregate(
      [
        rankOutput(0, 1, { finishedJobs: [job(1, true)], invalidBlockIds: [] }),
        rankOutput(1, 1, { finishedJobs: [job(1, false, [4, 9])], invalidBlockIds: [4, 9] }),
        rankOutput(2, 1, { finishedJobs: [job(1, false, [9, 2])], invalidBlockIds: [9, 2] }),
      ],
      stepOf(1),
    );
    expect(out.finishedJobs).toHaveLength(1);
    expect(out.finishedJobs[0].ok).toBe(false);
    expect(out.finishedJobs[0].failedGpuBlockIds).toEqual([2, 4, 9]);
    expect([...out.invalidBlockIds].sort()).toEqual([2, 4, 9]);
  });

  it('counts finished sending and receiving requests down to the number of ranks', () => {
    const agg = new KVOutputAggregator(2, TINY.vocabSize);
    const a = agg.aggregate(
      [rankOutput(0, 1, { finishedSending: ['r1'], finishedRecving: ['r2'] }), rankOutput(1, 1, { finishedRecving: ['r2'] })],
      stepOf(1),
    );
    expect([...a.finishedSending]).toEqual([]);
    expect([...a.finishedRecving]).toEqual(['r2']);
    const b = agg.aggregate([rankOutput(0, 2), rankOutput(1, 2, { finishedSending: ['r1'] })], stepOf(2));
    expect([...b.finishedSending]).toEqual(['r1']);
  });

  it('reports sampled tokens in batch order, with none for requests that sample nothing', () => {
    const prompt = [5, 6, 7, 8, 9];
    const request = (reqId: string, sample: boolean): ScheduledRequest => ({
      reqId,
      blockIds: [0],
      newBlockIds: [],
      startPosition: 0,
      tokens: prompt,
      sample,
      seed: 1,
    });
    const expected = referenceGenerate(TINY, { promptTokens: prompt, maxTokens: 1, seed: 1 }).outputTokens[0];
    const agg = new KVOutputAggregator(1, TINY.vocabSize);
    const digest = rankDigest(TINY, 1, 0, prompt, prompt.length);
    const out = agg.aggregate(
      [rankOutput(0, 1, {}, [['b', digest], ['d', digest]])],
      stepOf(1, [request('a', false), request('b', true), request('c', false), request('d', true)]),
    );
    expect([...out.sampledTokens]).toEqual([NO_TOKEN, expected, NO_TOKEN, expected]);
  });

  it('combines the ranks digests into the reference model token', () => {
    const prompt = [5, 6, 7, 8, 9];
    const seed = 1234;
    const expected = referenceGenerate(TINY, { promptTokens: prompt, maxTokens: 1, seed }).outputTokens[0];
    const tp = 4;
    const request: ScheduledRequest = {
      reqId: 'r',
      blockIds: [0],
      newBlockIds: [],
      startPosition: 0,
      tokens: prompt,
      sample: true,
      seed,
    };
    const agg = new KVOutputAggregator(tp, TINY.vocabSize);
    const outputs = Array.from({ length: tp }, (_, rank) =>
      rankOutput(rank, 1, {}, [['r', rankDigest(TINY, tp, rank, prompt, prompt.length)]]),
    );
    expect(agg.aggregate(outputs, stepOf(1, [request])).sampledTokens[0]).toBe(expected);
    // Missing one rank's digest changes the token.
    const partial = new KVOutputAggregator(tp, TINY.vocabSize);
    const wrong = outputs.map((o, i) => (i === 2 ? { ...o, digests: [0] } : o));
    expect(partial.aggregate(wrong, stepOf(1, [request])).sampledTokens[0]).not.toBe(expected);
  });

  it('rejects outputs for another step or with missing digests', () => {
    const agg = new KVOutputAggregator(1, TINY.vocabSize);
    expect(() => agg.aggregate([rankOutput(0, 3)], stepOf(4))).toThrow(/rank 0 answered step 3 for step 4/);
    const request: ScheduledRequest = { reqId: 'x', blockIds: [0], newBlockIds: [], startPosition: 0, tokens: [1], sample: true, seed: 1 };
    expect(() => agg.aggregate([rankOutput(0, 5)], stepOf(5, [request]))).toThrow(/returned 0 digests for 1 sampled/);
  });
});
