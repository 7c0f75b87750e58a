import { Counter, Registry } from 'prom-client';
import type { EngineMetrics, TransferCounters } from './engine-types.js';

/**
 * Exposes an engine's counters in the Prometheus text format. Values are read
 * from `source` (e.g. `() => engine.metrics()`, which is cheap) at scrape
 * time, so the registry costs nothing between scrapes.
 */
export function createMetricsRegistry(source: () => EngineMetrics, prefix = 'kvtier_'): Registry {
  const registry = new Registry();

  const counter = (
    name: string,
    help: string,
    labelNames: readonly string[],
    values: (m: EngineMetrics) => readonly (readonly [Record<string, string>, number])[],
  ): void => {
    new Counter({
      name: `${prefix}${name}`,
      help,
      labelNames: [...labelNames],
      registers: [registry],
      collect() {
        this.reset();
        for (const [labels, value] of values(source())) this.inc(labels, value);
      },
    });
  };

  const perDirection = (pick: (c: TransferCounters) => number) => (m: EngineMetrics) =>
    [
      [{ direction: 'gpu_to_cpu' }, pick(m.transfers.gpuToCpu)],
      [{ direction: 'cpu_to_gpu' }, pick(m.transfers.cpuToGpu)],
    ] as const;

  counter('steps_total', 'Engine steps run on every rank.', [], (m) => [[{}, m.steps]]);
  counter('preemptions_total', 'Requests preempted because GPU blocks ran out.', [], (m) => [[{}, m.preemptions]]);
  counter('requests_total', 'Requests by outcome.', ['state'], (m) => [
    [{ state: 'added' }, m.requests.added],
    [{ state: 'finished' }, m.requests.finished],
    [{ state: 'aborted' }, m.requests.aborted],
    [{ state: 'failed' }, m.requests.failed],
  ]);
  counter('tokens_total', 'Prompt tokens received, output tokens generated, prompt tokens computed by prefill.', ['kind'], (m) => [
    [{ kind: 'prompt' }, m.tokens.prompt],
    [{ kind: 'output' }, m.tokens.output],
    [{ kind: 'prefill_computed' }, m.tokens.prefillComputed],
  ]);
  counter('hit_tokens_total', 'Prompt tokens served from a cache tier instead of computed.', ['tier'], (m) => [
    [{ tier: 'gpu_prefix' }, m.hits.gpuPrefixTokens],
    [{ tier: 'cpu' }, m.hits.cpuTierTokens],
  ]);
  counter('offload_jobs_total', 'Transfer jobs finished on every rank.', ['direction'], perDirection((c) => c.jobs));
  counter('offload_failed_jobs_total', 'Transfer jobs that failed on some rank.', ['direction'], perDirection((c) => c.failedJobs));
  counter('offload_bytes_total', 'Bytes moved by transfer jobs, summed over ranks.', ['direction'], perDirection((c) => c.bytes));
  counter('offload_busy_seconds_total', 'Device time of transfer jobs.', ['direction'], perDirection((c) => c.busyMs / 1000));
  counter('load_failure_blocks_total', 'GPU blocks whose load failed.', [], (m) => [[{}, m.loadFailures.blocks]]);
  counter('requests_recovered_total', 'Requests recomputed after a failed load.', [], (m) => [[{}, m.loadFailures.requestsRecovered]]);
  counter('rank_restarts_total', 'Ranks respawned after they died.', [], (m) => [[{}, m.rankRestarts]]);

  return registry;
}
