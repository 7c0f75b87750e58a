import { describe, expect, it } from 'vitest';
import type { ScheduledRequest, SchedulerOutput, TransferJobSpec } from '../../src/protocol/step-protocol.js';
import { kvGeometry } from '../../src/core/kv-geometry.js';
import { parseFaultPlan, type FaultPlan } from '../../src/faults/plan.js';
import { rankSetups } from '../../src/runtime/assembly/rank-setups.js';
import { SimulatedRanks, type SimulatedRanksOptions } from '../../src/sim/simulated-ranks.js';
import { promptOf, referenceTokens, TINY } from '../scheduler/helpers.js';

/**
 * The production rank workers over simulated devices, driven with hand-built
 * steps: what a step computes, when its transfers land, and what the merged
 * output reports.
 */

const BLOCK = 4;

type RanksOptions = Omit<SimulatedRanksOptions, 'setups'> & { readonly tp?: number; readonly faultPlan?: FaultPlan };

/** Ranks over TINY in blocks of 4 tokens, 16 GPU and 8 CPU blocks each, set up as the assembly sets them up. */
function ranks({ tp = 1, faultPlan = parseFaultPlan(''), ...options }: RanksOptions = {}): SimulatedRanks {
  const geometry = kvGeometry({ model: TINY, tp, blockSize: BLOCK });
  return new SimulatedRanks({ setups: rankSetups(geometry, 16, { backend: 'host' }, { numCpuBlocks: 8 }, faultPlan), ...options });
}

function compute(reqId: string, table: number[] | null, start: number, tokens: number[], sample = true): ScheduledRequest {
  return { reqId, blockIds: table, newBlockIds: [], startPosition: start, tokens, sample, seed: 7 };
}

/** Builds consecutive steps (each scenario starts at step 0). */
function stepper() {
  let next = 0;
  return (
    requests: ScheduledRequest[],
    offload: Partial<NonNullable<SchedulerOutput['offload']>> | null = null,
    finishedReqIds: string[] = [],
  ): SchedulerOutput => ({
    step: next++,
    requests,
    totalScheduledTokens: requests.reduce((n, r) => n + r.tokens.length, 0),
    preemptedReqIds: [],
    finishedReqIds,
    offload: offload === null ? null : { flushReqIds: [], stores: [], loads: [], ...offload },
  });
}

function job(jobId: number, direction: TransferJobSpec['direction'], gpu: number[], cpu: number[], reqId: string | null = 'x'): TransferJobSpec {
  return { jobId, reqId, direction, gpuBlockIds: gpu, cpuBlockIds: cpu, firstSubBlock: 0, fence: false };
}

// Every step here computes at most one request, so its sampled token is sampledTokens[0].
const prompt = promptOf(8, 31);
const expectedFirst = referenceTokens({ prompt, maxTokens: 1 })[0];

/** a's prompt computed into blocks 0-1 and stored to CPU blocks 4-5 (the store lands in the next step). */
async function storedPrompt(sim: SimulatedRanks, step: ReturnType<typeof stepper>): Promise<void> {
  await sim.execute(step([compute('a', [0, 1], 0, prompt, false)], { stores: [job(1, 'gpuToCpu', [0, 1], [4, 5], 'a')] }));
  const landed = await sim.execute(step([], {}));
  expect(landed.finishedJobs.map((j) => [j.jobId, j.ok])).toEqual([[1, true]]);
}

describe('simulated ranks', () => {
  for (const tp of [1, 2]) {
    it(`samples the reference token from KV written through the block table (tp = ${tp})`, async () => {
      const sim = ranks({ tp });
      const out = await sim.execute(stepper()([compute('a', [3, 9], 0, prompt)]));
      expect(out.sampledTokens[0]).toBe(expectedFirst);
      expect(sim.rankOutputs.map((o) => o.rank)).toEqual([...Array(tp).keys()]);
    });
  }

  it('sums the digests of every rank: one rank alone samples another token', async () => {
    const sim = ranks({ tp: 2 });
    await sim.execute(stepper()([compute('a', [3, 9], 0, prompt)]));
    const [rank0, rank1] = sim.rankOutputs;
    expect(rank0.digests[0]).not.toBe(rank1.digests[0]);
    const alone = ranks({ tp: 1 });
    const out = await alone.execute(stepper()([compute('a', [3, 9], 0, prompt)]));
    expect(out.sampledTokens[0]).toBe(expectedFirst);
    expect(alone.rankOutputs[0].digests[0]).toBe((rank0.digests[0] + rank1.digests[0]) >>> 0);
  });

  it('gives a wrong token when the table points at a block that does not hold the prefix', async () => {
    const sim = ranks();
    const step = stepper();
    await sim.execute(step([compute('a', [3, 9], 0, prompt.slice(0, 4), false)]));
    // b claims the first four tokens are computed, but its table points at a block nobody wrote.
    const out = await sim.execute(step([compute('b', [5, 9], 4, prompt.slice(4))]));
    expect(out.sampledTokens[0]).not.toBe(expectedFirst);
    const shared = await sim.execute(step([compute('c', [3, 10], 4, prompt.slice(4))]));
    expect(shared.sampledTokens[0]).toBe(expectedFirst);
  });

  it('round-trips blocks through the CPU tier: a store, then a load into other blocks', async () => {
    const sim = ranks({ tp: 2, storeLatencySteps: 0, loadLatencySteps: 0 });
    const step = stepper();
    await storedPrompt(sim, step);
    const loaded = await sim.execute(step([compute('b', [6, 7], 7, prompt.slice(7))], { loads: [job(2, 'cpuToGpu', [6, 7], [4, 5], 'b')] }));
    expect(loaded.finishedRecving).toEqual(new Set(['b']));
    expect(loaded.sampledTokens[0]).toBe(expectedFirst);
  });

  it('lands a load when its latency has passed, or at once when a forward reads its blocks', async () => {
    const sim = ranks({ storeLatencySteps: 0, loadLatencySteps: 3 });
    const step = stepper();
    await storedPrompt(sim, step);
    const quiet = await sim.execute(step([], { loads: [job(2, 'cpuToGpu', [6, 7], [4, 5], 'b')] }));
    expect(quiet.finishedJobs).toEqual([]);
    expect((await sim.execute(step([], {}))).finishedJobs).toEqual([]);
    expect((await sim.execute(step([], {}))).finishedJobs).toEqual([]);
    expect((await sim.execute(step([], {}))).finishedJobs.map((j) => j.jobId)).toEqual([2]);

    const read = await sim.execute(step([compute('c', [8, 9], 7, prompt.slice(7))], { loads: [job(3, 'cpuToGpu', [8, 9], [4, 5], 'c')] }));
    expect(read.finishedJobs.map((j) => j.jobId)).toEqual([3]);
    expect(read.sampledTokens[0]).toBe(expectedFirst);
  });

  it('poisons and reports the blocks of a failed load', async () => {
    const sim = ranks({ storeLatencySteps: 0, loadLatencySteps: 0 });
    const step = stepper();
    await storedPrompt(sim, step);
    sim.setLoadFaults((spec) => [spec.gpuBlockIds[1]]);
    const out = await sim.execute(step([compute('b', [6, 7], 7, prompt.slice(7))], { loads: [job(2, 'cpuToGpu', [6, 7], [4, 5], 'b')] }));
    expect(out.invalidBlockIds).toEqual(new Set([7]));
    expect(out.finishedJobs[0]).toMatchObject({ jobId: 2, ok: false, failedGpuBlockIds: [7] });
    expect(out.sampledTokens[0]).not.toBe(expectedFirst);
  });

  it("fails the listed blocks of loads after the device's setFaults, and counts them", async () => {
    const sim = ranks({ storeLatencySteps: 0, loadLatencySteps: 0 });
    const step = stepper();
    await storedPrompt(sim, step);
    sim.devices[0].setFaults({ loadFailBlocks: [6] });
    const out = await sim.execute(step([compute('b', [6, 7], 7, prompt.slice(7))], { loads: [job(2, 'cpuToGpu', [6, 7], [4, 5], 'b')] }));
    expect(out.finishedJobs[0]).toMatchObject({ jobId: 2, ok: false, failedGpuBlockIds: [6] });
    expect(sim.devices[0].faultCounters().loadBlocksFailed).toBe(1);
    expect(sim.rankOutputs[0].injectedLoadFailures).toBe(1);
  });

  it("fails a load on the rank the fault plan names, and the merged job fails with that rank's block", async () => {
    const sim = ranks({ tp: 2, storeLatencySteps: 0, loadLatencySteps: 0, faultPlan: parseFaultPlan('load-fail:rank=1,blocks=7') });
    const step = stepper();
    await storedPrompt(sim, step);
    const out = await sim.execute(step([compute('b', [6, 7], 7, prompt.slice(7))], { loads: [job(2, 'cpuToGpu', [6, 7], [4, 5], 'b')] }));
    expect(out.finishedJobs[0]).toMatchObject({ jobId: 2, ok: false, failedGpuBlockIds: [7] });
    expect(sim.rankOutputs.map((o) => o.injectedLoadFailures)).toEqual([0, 1]);
    expect(out.sampledTokens[0]).not.toBe(expectedFirst);
  });

  it('with ranks of different speeds, reports a failed block at the first rank and the job once every rank finished it', async () => {
    const sim = ranks({ tp: 2, storeLatencySteps: 0, loadLatencySteps: [1, 3] });
    const step = stepper();
    await storedPrompt(sim, step);
    sim.setLoadFaults((spec) => [spec.gpuBlockIds[0]]);
    await sim.execute(step([], { loads: [job(2, 'cpuToGpu', [6, 7], [4, 5], 'b')] }));
    const fast = await sim.execute(step([], {}));
    expect(fast.invalidBlockIds).toEqual(new Set([6]));
    expect(fast.finishedJobs).toEqual([]);
    expect(fast.finishedRecving).toEqual(new Set());
    expect((await sim.execute(step([], {}))).finishedJobs).toEqual([]);
    const slow = await sim.execute(step([], {}));
    expect(slow.finishedJobs).toMatchObject([{ jobId: 2, ok: false, failedGpuBlockIds: [6] }]);
    expect(slow.finishedRecving).toEqual(new Set(['b']));
  });

  it("reads a store's blocks only when it lands, so a block reused before then is stored wrong", async () => {
    const sim = ranks({ storeLatencySteps: 1 });
    const step = stepper();
    await sim.execute(step([compute('a', [0, 1], 0, prompt, false)], { stores: [job(1, 'gpuToCpu', [0], [2], 'a')] }));
    const before = sim.devices[0].gpuStates(0);
    // The store is submitted at the next step and lands at the end of the one after, after a write into block 0.
    await sim.execute(step([], {}));
    const out = await sim.execute(step([compute('z', [0], 0, [1, 2, 3, 4], false)], {}));
    expect(out.finishedJobs.map((j) => j.jobId)).toEqual([1]);
    expect(Array.from(sim.devices[0].cpu.readBlock(2))).not.toEqual(Array.from(before));
  });

  it('reports a finished request as done sending once its stores landed', async () => {
    const sim = ranks({ tp: 2, storeLatencySteps: 1 });
    const step = stepper();
    await sim.execute(step([compute('a', [0, 1], 0, prompt, false)], { stores: [job(1, 'gpuToCpu', [0, 1], [0, 1], 'a')] }));
    // The store is submitted at this step's start and lands one step later.
    expect((await sim.execute(step([], {}, ['a']))).finishedSending).toEqual(new Set());
    const done = await sim.execute(step([], {}));
    expect(done.finishedJobs.map((j) => j.jobId)).toEqual([1]);
    expect(done.finishedSending).toEqual(new Set(['a']));
  });

  it('starts over on fresh devices after a restart: nothing computed before is readable', async () => {
    const sim = ranks();
    const step = stepper();
    await sim.execute(step([compute('a', [3, 9], 0, prompt.slice(0, 4), false)]));
    await sim.restart();
    const out = await sim.execute(step([compute('b', [3, 9], 4, prompt.slice(4))]));
    expect(out.sampledTokens[0]).not.toBe(expectedFirst);
  });

  it('rejects a request it has no block table for', async () => {
    const sim = ranks();
    await expect(sim.execute(stepper()([compute('ghost', null, 0, [1])]))).rejects.toThrow(/unknown request ghost/);
  });

  it('rejects tokens beyond the block table', async () => {
    const sim = ranks();
    await expect(sim.execute(stepper()([compute('a', [0], 0, prompt)]))).rejects.toThrow(/covers 4/);
  });
});
