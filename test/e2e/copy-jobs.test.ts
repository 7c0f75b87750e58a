import { describe, expect, it } from 'vitest';
import { probe, withSwitches, type TransferLogEntry, type WorkerConnectorSwitches } from '../../src/testing/index.js';
import type { EngineConfigInput, EngineMetrics, RequestSpec } from '../../src/runtime/engine-types.js';
import { mismatches, runWaves, tokens, withEngine } from './helpers.js';

/**
 * On an engine's rank threads (host backend), the transfer jobs a rank
 * submits together go to its device as one copy job per direction, and the
 * engine's transfer metrics count those copy jobs.
 */

const config: EngineConfigInput = { tp: 2, gpuBlocks: 96, cpuBlocks: 512, maxNumSeqs: 8, computeNsPerToken: 2_000 };

/** Six prompts prefilled together, pushed out of the GPU pool, then asked again together. */
function sixTwice(): RequestSpec[][] {
  const prompts = Array.from({ length: 6 }, (_, i) => tokens(900 + i, 64));
  return [
    prompts.map((p, i) => ({ id: `first${i}`, promptTokens: p, maxTokens: 2, seed: i })),
    Array.from({ length: 6 }, (_, i) => ({ id: `filler${i}`, promptTokens: tokens(950 + i, 64), maxTokens: 2, seed: i })),
    prompts.map((p, i) => ({ id: `again${i}`, promptTokens: p, maxTokens: 2, seed: 10 + i })),
  ];
}

interface Outcome {
  readonly wrong: string[];
  readonly metrics: EngineMetrics;
  readonly logs: TransferLogEntry[][];
}

async function run(worker: WorkerConnectorSwitches = {}): Promise<Outcome> {
  return withEngine(
    config,
    async (engine) => {
      const finished = await runWaves(engine, sixTwice());
      return { wrong: mismatches(finished), metrics: engine.metrics(), logs: await probe(engine).transferLogs() };
    },
    withSwitches({ worker: { recordTransfers: true, ...worker } }),
  );
}

/** The most requests whose stores one rank submitted in one step, and the most copy jobs that step took. */
function busiestStoreStep(log: readonly TransferLogEntry[]): { requests: number; copyJobs: number } {
  const steps = new Map<number, TransferLogEntry[]>();
  for (const e of log) if (e.direction === 'gpuToCpu') steps.set(e.submittedStep, [...(steps.get(e.submittedStep) ?? []), e]);
  let busiest = { requests: 0, copyJobs: 0 };
  for (const entries of steps.values()) {
    const requests = new Set(entries.map((e) => e.reqId)).size;
    if (requests > busiest.requests) busiest = { requests, copyJobs: new Set(entries.map((e) => e.copyJobId)).size };
  }
  return busiest;
}

describe('copy jobs on the engine', () => {
  it("a step's stores for several requests go out as one copy job per rank, and the run counts fewer copy jobs than jobs", async () => {
    const { wrong, metrics, logs } = await run();
    expect(wrong).toEqual([]);
    for (const log of logs) expect(busiestStoreStep(log)).toEqual({ requests: expect.any(Number), copyJobs: 1 });
    expect(busiestStoreStep(logs[0]).requests).toBeGreaterThan(1);
    const { gpuToCpu, cpuToGpu } = metrics.transfers;
    expect(metrics.hits.cpuTierTokens).toBeGreaterThan(0);
    // Copy jobs are counted on every rank; jobs once.
    expect(gpuToCpu.copyJobs).toBeLessThan(gpuToCpu.jobs * config.tp!);
    expect(cpuToGpu.copyJobs).toBeLessThan(cpuToGpu.jobs * config.tp!);
  });

  it('with coalescing switched off, every job is a copy job of its own on every rank (sensitivity)', async () => {
    const { wrong, metrics, logs } = await run({ separateCopyJobs: true });
    expect(wrong).toEqual([]);
    expect(busiestStoreStep(logs[0]).copyJobs).toBeGreaterThan(1);
    const { gpuToCpu, cpuToGpu } = metrics.transfers;
    expect(gpuToCpu.copyJobs).toBe(gpuToCpu.jobs * config.tp!);
    expect(cpuToGpu.copyJobs).toBe(cpuToGpu.jobs * config.tp!);
  });
});
