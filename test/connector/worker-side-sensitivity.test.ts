import { describe, expect, it } from 'vitest';
import type { WorkerConnectorSwitches } from '../../src/connector/worker-connector-switches.js';
import { OffloadHarness, promptOf } from './helpers.js';

/**
 * The connector tests run the production worker side (RankWorker and
 * WorkerConnector over simulated devices): turning one of its reference
 * behaviours off must show up as wrong tokens or wrong CPU-tier blocks.
 */

/** Requests whose decodes outgrow a pool of 8 blocks, so some are preempted while their stores are pending. */
async function crowdedPool(switches: WorkerConnectorSwitches, tp = 1): Promise<OffloadHarness> {
  const h = new OffloadHarness({ tp, scheduler: { numGpuBlocks: 8, maxModelLen: 32 }, switches });
  for (const [i, id] of ['a', 'b', 'c'].entries()) h.add(id, { prompt: promptOf(8, i + 1), maxTokens: 12 });
  await h.runUntilIdle();
  for (const [i, id] of ['a2', 'b2', 'c2'].entries()) h.add(id, { prompt: promptOf(8, i + 1), maxTokens: 12, seed: 9 });
  await h.runUntilIdle();
  return h;
}

/** Prompts served twice, the second time from the CPU tier, while a third of all stores fail. */
async function failingStores(switches: WorkerConnectorSwitches): Promise<OffloadHarness> {
  const h = new OffloadHarness({ switches });
  await h.step(); // the devices are open
  h.ranks.devices.forEach((device) => device.setFaults({ storeFailProbability: 0.3, seed: 5 }));
  const prompts = [0, 1, 2, 3, 4, 5].map((i) => promptOf(16, 40 + i));
  for (const [i, prompt] of prompts.entries()) await h.serve(`first-${i}`, { prompt, maxTokens: 2 });
  h.forgetGpuCache();
  for (const [i, prompt] of prompts.entries()) await h.serve(`again-${i}`, { prompt, maxTokens: 2, seed: 3 });
  return h;
}

function damage(h: OffloadHarness): string[] {
  return [...h.wrongOutputs(), ...h.wrongTierBlocks()];
}

describe('worker-side reference behaviours (sensitivity)', () => {
  for (const tp of [1, 2]) {
    it(`keeps every output and tier block exact with every behaviour on (tp = ${tp})`, async () => {
      const h = await crowdedPool({}, tp);
      expect(h.scheduler.stats().preemptions).toBeGreaterThan(0);
      expect(damage(h)).toEqual([]);
      expect(await h.leaks()).toEqual([]);
    });
  }

  it("without the preemption flush, a preempted request's blocks are stored after they were reused", async () => {
    const h = await crowdedPool({ skipPreemptionFlush: true });
    expect(damage(h)).not.toEqual([]);
  });

  it('stores submitted during the forward that computes their blocks, unordered, store stale KV', async () => {
    const h = await crowdedPool({ submitStoresImmediately: true, storesIgnoreCompute: true });
    expect(damage(h)).not.toEqual([]);
  });

  it('a failed store leaves its CPU blocks out of the tier, and reporting it ok lets a request load poisoned KV', async () => {
    const honest = await failingStores({});
    expect(honest.results.some((r) => r.finishedJobs.some((j) => j.direction === 'gpuToCpu' && !j.ok))).toBe(true);
    expect(honest.connector.metrics().cpuTierHitTokens).toBeGreaterThan(0);
    expect(damage(honest)).toEqual([]);
    const lying = await failingStores({ reportFailedStoresAsOk: true });
    expect(lying.wrongOutputs()).not.toEqual([]);
  });
});
