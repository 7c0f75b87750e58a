import { describe, expect, it } from 'vitest';
import type { ScheduledRequest, SchedulerOutput, TransferJobSpec } from '../../src/protocol/step-protocol.js';
import { SimulatedRunner } from '../../src/sim/simulated-runner.js';
import { promptOf, referenceTokens, TINY } from './helpers.js';

const BLOCK = 4;

function runner(options: { loadLatencySteps?: number; storeLatencySteps?: number } = {}): SimulatedRunner {
  return new SimulatedRunner({ shape: TINY, blockSize: BLOCK, numGpuBlocks: 16, numCpuBlocks: 8, ...options });
}

function compute(reqId: string, table: number[] | null, start: number, tokens: number[], sample = true): ScheduledRequest {
  return { reqId, blockIds: table, newBlockIds: [], startPosition: start, tokens, sample, seed: 7 };
}

let nextStep = 0;
function step(requests: ScheduledRequest[], offload: Partial<NonNullable<SchedulerOutput['offload']>> | null = null): SchedulerOutput {
  return {
    step: nextStep++,
    requests,
    totalScheduledTokens: requests.reduce((n, r) => n + r.tokens.length, 0),
    preemptedReqIds: [],
    finishedReqIds: [],
    offload: offload === null ? null : { flushReqIds: [], stores: [], loads: [], ...offload },
  };
}

function job(jobId: number, direction: TransferJobSpec['direction'], gpu: number[], cpu: number[], reqId: string | null = 'x'): TransferJobSpec {
  return { jobId, reqId, direction, gpuBlockIds: gpu, cpuBlockIds: cpu, firstSubBlock: 0, fence: false };
}

const prompt = promptOf(8, 31);
const expectedFirst = referenceTokens({ prompt, maxTokens: 1 })[0];

describe('simulated runner', () => {
  it('samples the reference token from KV it wrote through the block table', () => {
    const sim = runner();
    const out = sim.execute(step([compute('a', [3, 9], 0, prompt)]));
    expect(out.sampledTokens.get('a')).toBe(expectedFirst);
  });

  it('gives a wrong token when the table points at a block that does not hold the prefix', () => {
    const sim = runner();
    sim.execute(step([compute('a', [3, 9], 0, prompt.slice(0, 4), false)]));
    // b claims the first four tokens are computed, but its table points at a block nobody wrote.
    const out = sim.execute(step([compute('b', [5, 9], 4, prompt.slice(4))]));
    expect(out.sampledTokens.get('b')).not.toBe(expectedFirst);
    const shared = sim.execute(step([compute('c', [3, 10], 4, prompt.slice(4))]));
    expect(shared.sampledTokens.get('c')).toBe(expectedFirst);
  });

  it('round-trips blocks through the CPU tier: a store, then a load into other blocks', () => {
    const sim = runner({ storeLatencySteps: 0, loadLatencySteps: 0 });
    sim.execute(step([compute('a', [0, 1], 0, prompt, false)], { stores: [job(1, 'gpuToCpu', [0, 1], [4, 5], 'a')] }));
    const submitted = sim.execute(step([], {}));
    expect(submitted.finishedJobs.map((j) => [j.jobId, j.ok])).toEqual([[1, true]]);
    const loaded = sim.execute(
      step([compute('b', [6, 7], 7, prompt.slice(7))], { loads: [job(2, 'cpuToGpu', [6, 7], [4, 5], 'b')] }),
    );
    expect(loaded.finishedRecving).toEqual(new Set(['b']));
    expect(loaded.sampledTokens.get('b')).toBe(expectedFirst);
  });

  it('poisons and reports the blocks of a failed load', () => {
    const sim = runner({ storeLatencySteps: 0, loadLatencySteps: 0 });
    sim.execute(step([compute('a', [0, 1], 0, prompt, false)], { stores: [job(1, 'gpuToCpu', [0, 1], [4, 5], 'a')] }));
    sim.execute(step([], {}));
    sim.setLoadFaults((spec) => [spec.gpuBlockIds[1]]);
    const out = sim.execute(
      step([compute('b', [6, 7], 7, prompt.slice(7))], { loads: [job(2, 'cpuToGpu', [6, 7], [4, 5], 'b')] }),
    );
    expect(out.invalidBlockIds).toEqual(new Set([7]));
    expect(out.finishedJobs[0]).toMatchObject({ jobId: 2, ok: false, failedGpuBlockIds: [7] });
    expect(out.sampledTokens.get('b')).not.toBe(expectedFirst);
  });

  it('reads a store\'s blocks only when it completes, so a block reused before then is stored wrong', () => {
    const sim = runner({ storeLatencySteps: 0 });
    sim.execute(step([compute('a', [0, 1], 0, prompt, false)], { stores: [job(1, 'gpuToCpu', [0], [2], 'a')] }));
    const before = sim.readGpuBlock(0);
    // The store is submitted now and completes at the end of this step, after a write into block 0.
    const out = sim.execute(step([compute('z', [0], 0, [1, 2, 3, 4], false)], {}));
    expect(out.finishedJobs.map((j) => j.jobId)).toEqual([1]);
    expect(Array.from(sim.cpu.readBlock(2))).not.toEqual(Array.from(before));
  });

  it('reports a finished request as done sending once its stores completed', () => {
    const sim = runner({ storeLatencySteps: 1 });
    sim.execute(step([compute('a', [0, 1], 0, prompt, false)], { stores: [job(1, 'gpuToCpu', [0, 1], [0, 1], 'a')] }));
    const finished: SchedulerOutput = { ...step([], {}), finishedReqIds: ['a'] };
    expect(sim.execute(finished).finishedSending).toEqual(new Set()); // the store was only submitted now
    expect(sim.execute(step([], {})).finishedSending).toEqual(new Set(['a']));
  });

  it('rejects a request it has no block table for', () => {
    const sim = runner();
    expect(() => sim.execute(step([compute('ghost', null, 0, [1])]))).toThrow(/request 'ghost' has no block table/);
  });

  it('rejects tokens beyond the block table', () => {
    const sim = runner();
    expect(() => sim.execute(step([compute('a', [0], 0, prompt)]))).toThrow(/covers 4/);
  });
});
