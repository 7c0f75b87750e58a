import { describe, expect, it } from 'vitest';
import type { EngineLogger } from '../../src/log/engine-events.js';
import type { Engine } from '../../src/runtime/engine.js';
import type { EngineConfigInput } from '../../src/runtime/engine-types.js';
import { createMetricsRegistry } from '../../src/prometheus/metrics-registry.js';
import { expectIdle, runWaves, tokens, withEngine } from '../e2e/helpers.js';
import { evictThenReuse, FAST, SMALL_GPU } from '../failures/helpers.js';
import { DEATH_STEP } from '../failures/rank-deaths.js';
import { Exposition } from '../support/exposition.js';
import { probe } from '../../src/testing/index.js';

/**
 * createMetricsRegistry(engine) for embedders: the histograms, gauges and
 * counters by cause say what the engine did, read at scrape time.
 */

async function scrapeRegistry(engine: Engine): Promise<Exposition> {
  return new Exposition(await createMetricsRegistry(engine).metrics());
}

/**
 * Ten requests of 40 to 130 tokens, each generating 40 to 60 more, in a
 * 24-block pool: the first ones admitted outgrow the pool while decoding, so
 * running requests are preempted for blocks however the stores are timed.
 */
function preemptionStorm() {
  return Array.from({ length: 10 }, (_, i) => ({
    id: `p${i}`,
    promptTokens: tokens(900 + i, 40 + ((i * 37) % 90)),
    maxTokens: 40 + (i % 3) * 10,
    seed: i,
  }));
}

interface LogRecord {
  readonly level: string;
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

/** A logger that keeps what it is given. */
function capturingLogger(): EngineLogger & { readonly records: LogRecord[] } {
  const records: LogRecord[] = [];
  const at = (level: string) => (fields: object, message: string) => records.push({ level, fields: { ...fields }, message });
  return { records, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

const events = (records: readonly LogRecord[]) => records.map((r) => r.fields.event);

describe('an engine registry', () => {
  it('counts every finished request in the latency histograms and reads idle gauges once the engine is idle', async () => {
    await withEngine({ ...FAST, tp: 2, gpuBlocks: 24, cpuBlocks: 256, maxNumSeqs: 8 }, async (engine) => {
      const finished = await runWaves(engine, [preemptionStorm()]);
      await expectIdle(engine);
      const e = await scrapeRegistry(engine);
      for (const name of ['kvtier_time_to_first_token_seconds', 'kvtier_e2e_request_latency_seconds', 'kvtier_request_queue_time_seconds']) {
        expect(e.histogram(name)[0].count, name).toBe(finished.length);
      }
      // Every request generates at least 40 tokens, so each has a time per output token.
      expect(e.histogram('kvtier_time_per_output_token_seconds')[0].count).toBe(finished.length);
      const ttftSum = finished.reduce((sum, f) => sum + (f.firstTokenMs! - f.arrivalMs) / 1000, 0);
      expect(e.histogram('kvtier_time_to_first_token_seconds')[0].sum).toBeCloseTo(ttftSum, 6);
      expect(e.histogram('kvtier_step_duration_seconds')[0].count).toBe(engine.metrics().steps);
      expect(e.histogram('kvtier_rank_step_duration_seconds').map((s) => [s.labels.rank, s.count])).toEqual([
        ['0', engine.metrics().steps],
        ['1', engine.metrics().steps],
      ]);
      // Each admission looks the prompt up in both tiers.
      const lookups = e.histogram('kvtier_lookup_duration_seconds');
      expect(lookups.map((s) => s.labels.tier)).toEqual(['gpu_prefix', 'cpu']);
      expect(lookups[0].count).toBeGreaterThanOrEqual(finished.length);
      expect(lookups[1].count).toBe(lookups[0].count);
      const stores = e.histogram('kvtier_transfer_job_duration_seconds').find((s) => s.labels.direction === 'gpu_to_cpu' && s.labels.outcome === 'ok')!;
      expect(stores.count).toBe(engine.metrics().transfers.gpuToCpu.jobs);

      const preempted = engine.metrics().preemptions;
      expect(preempted).toBeGreaterThan(0);
      expect(e.value('kvtier_preemptions_total', { cause: 'out_of_blocks' })).toBe(preempted);
      expect(e.value('kvtier_preemptions_total', { cause: 'rank_loss' })).toBe(0);
      expect(e.value('kvtier_evicted_blocks_total', { tier: 'gpu' })).toBeGreaterThan(0);

      expect(e.value('kvtier_requests_running')).toBe(0);
      expect(e.value('kvtier_requests_waiting')).toBe(0);
      expect(e.value('kvtier_requests_waiting_for_load')).toBe(0);
      expect(e.value('kvtier_gpu_blocks_used')).toBe(0);
      expect(e.value('kvtier_gpu_blocks_free')).toBe(24);
      expect(e.value('kvtier_cpu_blocks_being_stored')).toBe(0);
      expect(e.value('kvtier_cpu_blocks_pinned')).toBe(0);
      expect(e.value('kvtier_cpu_blocks_free') + e.value('kvtier_cpu_blocks_ready')).toBe(e.value('kvtier_cpu_blocks_capacity'));
      expect(e.series('kvtier_transfer_jobs_in_flight').map((s) => s.value)).toEqual([0, 0]);
      expect(e.value('kvtier_ranks_alive')).toBe(2);
    });
  });

  it('shows requests running and blocks used while a step is in progress', async () => {
    await withEngine({ ...FAST, tp: 1, gpuBlocks: 64, cpuBlocks: 256 }, async (engine) => {
      await engine.addRequests([{ promptTokens: tokens(5, 48), maxTokens: 8 }, { promptTokens: tokens(6, 48), maxTokens: 8 }]);
      await engine.step();
      const e = await scrapeRegistry(engine);
      expect(e.value('kvtier_requests_running')).toBe(2);
      expect(e.value('kvtier_gpu_blocks_used')).toBe(6);
      expect(e.value('kvtier_gpu_blocks_free')).toBe(58);
      await engine.run();
    });
  });

  it('counts injected load failures under cause "injected", none under "device", and exports "remote" at 0', async () => {
    await withEngine({ ...SMALL_GPU, tp: 2, faults: 'load-fail:rank=1,p=0.3', faultSeed: 5 }, async (engine) => {
      await runWaves(engine, evictThenReuse());
      const e = await scrapeRegistry(engine);
      const injected = (await probe(engine).faultStats()).reduce((sum, s) => sum + s.loadBlocksFailed, 0);
      expect(injected).toBeGreaterThan(0);
      expect(e.value('kvtier_load_failed_blocks_total', { cause: 'injected' })).toBe(injected);
      expect(e.value('kvtier_load_failed_blocks_total', { cause: 'device' })).toBe(0);
      expect(e.value('kvtier_load_failed_blocks_total', { cause: 'remote' })).toBe(0);
      expect(e.histogram('kvtier_transfer_job_duration_seconds').find((s) => s.labels.direction === 'cpu_to_gpu' && s.labels.outcome === 'failed')!.count).toBe(
        engine.metrics().transfers.cpuToGpu.failedJobs,
      );
    });
  });

  it('counts blocks a reuse store policy declined', async () => {
    await withEngine({ ...SMALL_GPU, tp: 1, storePolicy: 'reuse:2' }, async (engine) => {
      await runWaves(engine, evictThenReuse());
      const e = await scrapeRegistry(engine);
      expect(e.value('kvtier_store_declined_blocks_total')).toBeGreaterThan(0);
      expect(e.value('kvtier_store_declined_blocks_total')).toBe(probe(engine).holdings().cpuTier!.storesDeclined);
    });
  });

  it('exports the counters alone from a bare metrics function, as before', async () => {
    await withEngine({ ...FAST, tp: 1, gpuBlocks: 32, offload: false }, async (engine) => {
      await runWaves(engine, [[{ promptTokens: tokens(1, 20), maxTokens: 3 }]]);
      const e = new Exposition(await createMetricsRegistry(() => engine.metrics()).metrics());
      expect(e.value('kvtier_requests_total', { state: 'finished' })).toBe(1);
      expect(e.value('kvtier_preemptions_total')).toBe(0);
      expect(e.names().some((n) => n.endsWith('_seconds') && e.types.get(n) === 'HISTOGRAM')).toBe(false);
    });
  });
});

describe('a rank lost and restarted', () => {
  const config: EngineConfigInput = { ...SMALL_GPU, tp: 2, rankRestart: true, faults: `crash:rank=1,step=${DEATH_STEP}` };

  it('counts the requests that lost their KV as preempted by rank loss, and logs the death and the restart', async () => {
    const logger = capturingLogger();
    await withEngine(
      config,
      async (engine) => {
        await runWaves(engine, evictThenReuse(12));
        const e = await scrapeRegistry(engine);
        expect(e.value('kvtier_rank_restarts_total')).toBe(1);
        expect(e.value('kvtier_preemptions_total', { cause: 'rank_loss' })).toBeGreaterThan(0);
        expect(e.value('kvtier_ranks_alive')).toBe(2);
        expect(e.series('kvtier_transfer_jobs_in_flight').map((s) => s.value)).toEqual([0, 0]);
      },
      { logger },
    );
    const lost = logger.records.find((r) => r.fields.event === 'rank_lost')!;
    expect(lost).toMatchObject({ level: 'warn', fields: { rank: 1, step: DEATH_STEP } });
    expect(String(lost.fields.cause)).toMatch(/injected crash/);
    expect(logger.records.find((r) => r.fields.event === 'rank_restarted')).toMatchObject({ level: 'warn', fields: { rank: 1, attempt: 1 } });
    expect(events(logger.records).filter((e) => e === 'fault_rule_armed')).toHaveLength(1);
  });
});

describe('engine logs', () => {
  it('say when a delayed fault rule becomes active and when the first injected failure hits a rank', async () => {
    const logger = capturingLogger();
    await withEngine(
      { ...SMALL_GPU, tp: 2, faults: 'load-fail:rank=0,p=0.5,after=3', faultSeed: 3 },
      async (engine) => runWaves(engine, evictThenReuse()),
      { logger },
    );
    expect(logger.records.find((r) => r.fields.event === 'fault_rule_active')).toMatchObject({
      level: 'warn',
      fields: { step: 3, rule: 'load-fail rank=0 p=0.5 after=3' },
    });
    const injected = logger.records.filter((r) => r.fields.event === 'fault_injected');
    expect(injected).toHaveLength(1);
    expect(injected[0].fields.rank).toBe(0);
  });

  it('warn about steps slower than slowStepMs, naming the slowest rank', async () => {
    const logger = capturingLogger();
    await withEngine(
      // 1 ms of emulated compute per token (split over the ranks): the 200-token prefill takes 100 ms, each decode step well under 40.
      { tp: 2, gpuBlocks: 64, offload: false, computeNsPerToken: 1_000_000 },
      async (engine) => runWaves(engine, [[{ promptTokens: tokens(2, 200), maxTokens: 4 }]]),
      { logger, slowStepMs: 40 },
    );
    const slow = logger.records.filter((r) => r.fields.event === 'slow_step');
    expect(slow.map((r) => r.fields.step)).toContain(0);
    for (const record of slow) {
      expect(record.level).toBe('warn');
      expect(record.fields.ms as number).toBeGreaterThan(40);
      expect([0, 1]).toContain(record.fields.slowestRank);
    }
  });

  it('log nothing per request: a fault-free run of many requests logs no record at all', async () => {
    const logger = capturingLogger();
    await withEngine(
      { ...FAST, tp: 2, gpuBlocks: 24, cpuBlocks: 256, maxNumSeqs: 8 },
      async (engine) => runWaves(engine, [preemptionStorm()]),
      { logger },
    );
    expect(logger.records).toEqual([]);
  });
});
