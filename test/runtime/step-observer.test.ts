import { describe, expect, it } from 'vitest';
import { kvGeometry } from '../../src/core/kv-geometry.js';
import type { ModelRunnerOutput, RankStepOutput, SchedulerOutput } from '../../src/protocol/step-protocol.js';
import { StepObservers, type StepObserver } from '../../src/runtime/step-observer.js';
import { createRequest } from '../../src/scheduler/request.js';
import { assembleSimulatedEngine } from '../../src/sim/assemble-simulated.js';
import { promptOf, tinyConfig, TINY } from '../scheduler/helpers.js';

/** An observer that writes each call it gets, named `name`, into `log`. */
function recording(name: string, log: string[]): StepObserver {
  return {
    stepScheduled: (scheduled) => log.push(`${name} scheduled ${scheduled.step}`),
    stepAnswered: (_outputs, merged) => log.push(`${name} answered ${merged.step}`),
    stepFinished: (step) => log.push(`${name} finished ${step}`),
    transfersDropped: () => log.push(`${name} dropped`),
  };
}

/** A simulated engine with a CPU tier on two ranks, built by the assembly. */
function tieredEngine() {
  return assembleSimulatedEngine(
    kvGeometry({ model: TINY, tp: 2, blockSize: 4 }),
    { scheduler: tinyConfig(), cpuTier: { cpuBlocks: 64, eviction: 'lru', storePolicy: 'on-compute' } },
  );
}

describe('the step observer', () => {
  it('hands every call of a step to each observer, in the order they were given', () => {
    const log: string[] = [];
    const fanOut = new StepObservers([recording('a', log), recording('b', log)]);
    fanOut.stepScheduled({ step: 3 } as SchedulerOutput);
    fanOut.stepAnswered([] as RankStepOutput[], { step: 3 } as ModelRunnerOutput);
    fanOut.stepFinished(3, 1, []);
    fanOut.transfersDropped();
    expect(log).toEqual([
      'a scheduled 3', 'b scheduled 3',
      'a answered 3', 'b answered 3',
      'a finished 3', 'b finished 3',
      'a dropped', 'b dropped',
    ]);
  });

  it('counts in the transfer totals and the monitor every job the CPU tier issued, and times every step', async () => {
    const parts = tieredEngine();
    const prompt = promptOf(24, 5);
    const serve = async (id: string) => {
      parts.scheduler.addRequest(createRequest({ id, promptTokens: prompt, maxTokens: 3, seed: 1 }, parts.scheduler.requestLimits));
      while (parts.scheduler.hasPendingWork()) await parts.engine.step();
    };
    await serve('first');
    // The second run of the prompt finds it only in the CPU tier: loads go through the same observer.
    expect(parts.scheduler.kvCacheManager.pool.resetPrefixCache()).toBe(true);
    await serve('again');
    await parts.ranks.close();

    const issued = parts.tiers.offloading!.connector.metrics();
    expect(issued.storesIssued).toBeGreaterThan(0);
    expect(issued.loadsIssued).toBeGreaterThan(0);
    expect(parts.transfers.gpuToCpu.jobs).toBe(issued.storesIssued);
    expect(parts.transfers.cpuToGpu.jobs).toBe(issued.loadsIssued);
    expect(parts.monitor.jobsInFlight).toEqual({ gpuToCpu: 0, cpuToGpu: 0 });
    expect(parts.monitor.stepTime.count).toBe(parts.scheduler.stats().steps);
  });
});
