import { Registry } from 'prom-client';
import { directionLabel, LOAD_FAILURE_CAUSES } from '../metrics/engine-monitor.js';
import type { MonitoringSnapshot } from '../metrics/gauges.js';
import { registerSnapshotHistogram } from '../metrics/snapshot-histogram.js';
import { label, registerSnapshotValues, unlabelled, type Sample } from '../metrics/snapshot-values.js';
import { registerRemoteMetrics } from './remote-metrics.js';
import type { EngineMetrics, TransferCounters } from '../runtime/engine-types.js';

/**
 * What a registry reads: an Engine, or anything with its `metrics()` (the
 * counters) and, for histograms and gauges, its `monitoring()`.
 */
export interface MetricsSource {
  metrics(): EngineMetrics;
  monitoring?(): MonitoringSnapshot;
}

/**
 * Reads `read()` once per scrape: every metric's collect runs synchronously
 * within one `registry.metrics()` call, so they share the value, which is
 * dropped when the scrape's microtasks run.
 */
function oncePerScrape<T>(read: () => T): () => T {
  let cached: T | undefined;
  let held = false;
  return () => {
    if (!held) {
      cached = read();
      held = true;
      queueMicrotask(() => {
        held = false;
        cached = undefined;
      });
    }
    return cached as T;
  };
}

/**
 * Exposes an engine in the Prometheus text format: counters from
 * `metrics()`, and with `monitoring()` latency histograms, live gauges and
 * counters by cause. Everything is read from `source` at scrape time, so the
 * registry costs nothing between scrapes. `createMetricsRegistry(engine)`;
 * a bare `() => EngineMetrics` function gives the counters only.
 */
export function createMetricsRegistry(source: MetricsSource | (() => EngineMetrics), prefix = 'kvtier_'): Registry {
  const registry = new Registry();
  const metrics = oncePerScrape(typeof source === 'function' ? source : () => source.metrics());
  const monitoringOf = typeof source === 'function' ? undefined : source.monitoring?.bind(source);
  const monitoring = monitoringOf === undefined ? null : oncePerScrape(monitoringOf);

  const counter = (name: string, help: string, labelNames: readonly string[], values: () => readonly Sample[]): void =>
    registerSnapshotValues(registry, `${prefix}${name}`, help, 'counter', labelNames, values);
  const gauge = (name: string, help: string, labelNames: readonly string[], values: () => readonly Sample[]): void =>
    registerSnapshotValues(registry, `${prefix}${name}`, help, 'gauge', labelNames, values);

  const perDirection = (pick: (c: TransferCounters) => number) => (): readonly Sample[] => {
    const m = metrics();
    return [
      [label('direction', 'gpu_to_cpu'), pick(m.transfers.gpuToCpu)],
      [label('direction', 'cpu_to_gpu'), pick(m.transfers.cpuToGpu)],
    ];
  };

  counter('steps_total', 'Engine steps run on every rank.', [], () => [[unlabelled, metrics().steps]]);
  if (monitoring === null) {
    counter('preemptions_total', 'Requests preempted because GPU blocks ran out.', [], () => [[unlabelled, metrics().preemptions]]);
  }
  counter('requests_total', 'Requests by outcome.', ['state'], () => {
    const m = metrics();
    return [
      [label('state', 'added'), m.requests.added],
      [label('state', 'finished'), m.requests.finished],
      [label('state', 'aborted'), m.requests.aborted],
      [label('state', 'failed'), m.requests.failed],
    ];
  });
  counter(
    'tokens_total',
    'Prompt tokens received, output tokens generated, tokens computed by prefill (recomputed ones included), ' +
      'tokens computed again (recomputed), prompt tokens served or computed the first time (prompt_reached).',
    ['kind'],
    () => {
      const m = metrics();
      return [
        [label('kind', 'prompt'), m.tokens.prompt],
        [label('kind', 'output'), m.tokens.output],
        [label('kind', 'prefill_computed'), m.tokens.prefillComputed],
        [label('kind', 'recomputed'), m.tokens.recomputed],
        [label('kind', 'prompt_reached'), m.tokens.promptReached],
      ];
    },
  );
  counter('reread_tokens_total', 'Tokens a cache tier served again to a request that had reached them before (after a preemption or a rank loss).', ['tier'], () => {
    const m = metrics();
    return [
      [label('tier', 'gpu_prefix'), m.rereads.gpuPrefixTokens],
      [label('tier', 'cpu'), m.rereads.cpuTierTokens],
    ];
  });
  counter('hit_tokens_total', 'Prompt tokens served from a cache tier the first time their request reached them.', ['tier'], () => {
    const m = metrics();
    return [
      [label('tier', 'gpu_prefix'), m.hits.gpuPrefixTokens],
      [label('tier', 'cpu'), m.hits.cpuTierTokens],
      ...(m.remote ? [[label('tier', 'remote'), m.remote.hitTokens] as Sample] : []),
    ];
  });
  counter('offload_jobs_total', 'Transfer jobs finished on every rank.', ['direction'], perDirection((c) => c.jobs));
  counter('offload_failed_jobs_total', 'Transfer jobs that failed on some rank.', ['direction'], perDirection((c) => c.failedJobs));
  counter('offload_bytes_total', 'Bytes moved by transfer jobs, summed over ranks.', ['direction'], perDirection((c) => c.bytes));
  counter('offload_busy_seconds_total', 'Device time of transfer jobs.', ['direction'], perDirection((c) => c.busyMs / 1000));
  counter('offload_copy_jobs_total', 'Copy jobs the ranks ran for transfer jobs (one may carry several), summed over ranks.', ['direction'], perDirection((c) => c.copyJobs));
  counter('load_failure_blocks_total', 'GPU blocks whose load failed.', [], () => [[unlabelled, metrics().loadFailures.blocks]]);
  counter('requests_recovered_total', 'Requests recomputed after a failed load.', [], () => [[unlabelled, metrics().loadFailures.requestsRecovered]]);
  counter('rank_restarts_total', 'Ranks respawned after they died.', [], () => [[unlabelled, metrics().rankRestarts]]);

  registerRemoteMetrics(() => metrics().remote, counter, gauge);

  if (monitoring !== null) registerMonitoring(registry, prefix, monitoring, counter, gauge);
  return registry;
}

type Register = (name: string, help: string, labelNames: readonly string[], values: () => readonly Sample[]) => void;

function registerMonitoring(
  registry: Registry,
  prefix: string,
  read: () => MonitoringSnapshot,
  counter: Register,
  gauge: Register,
): void {
  const histogram = (name: string, help: string, labelNames: readonly string[], series: Parameters<typeof registerSnapshotHistogram>[4]) =>
    registerSnapshotHistogram(registry, `${prefix}${name}`, help, labelNames, series);
  const one = (pick: (s: MonitoringSnapshot) => MonitoringSnapshot['monitor']['stepTime']) => () => [
    { labels: unlabelled, histogram: pick(read()) },
  ];

  histogram('time_to_first_token_seconds', 'Arrival to first output token, per finished request.', [], one((s) => s.monitor.timeToFirstToken));
  histogram(
    'time_per_output_token_seconds',
    'Mean time between output tokens after the first, per finished request with two or more.',
    [],
    one((s) => s.monitor.timePerOutputToken),
  );
  histogram('e2e_request_latency_seconds', 'Arrival to finish, per finished request (any outcome).', [], one((s) => s.monitor.endToEnd));
  histogram('request_queue_time_seconds', 'Arrival to first scheduled, per finished request.', [], one((s) => s.monitor.queueTime));
  histogram('step_duration_seconds', 'Wall time of an engine step: schedule, every rank, merge and update.', [], one((s) => s.monitor.stepTime));
  histogram('rank_step_duration_seconds', 'Time each rank spent in a step.', ['rank'], () => read().monitor.rankStepSeries());
  histogram(
    'transfer_job_duration_seconds',
    'Device time of a transfer job (slowest rank), by direction and outcome.',
    ['direction', 'outcome'],
    () => read().monitor.transferSeries(),
  );
  histogram('lookup_duration_seconds', 'Time of one prompt lookup in a cache tier at admission.', ['tier'], () => read().monitor.lookupSeries());

  gauge('requests_running', 'Requests computing tokens.', [], () => [[unlabelled, read().gauges.requests.running]]);
  gauge('requests_waiting', 'Requests queued (new or preempted), not waiting for a load.', [], () => [[unlabelled, read().gauges.requests.waiting]]);
  gauge('requests_waiting_for_load', 'Admitted requests waiting for their KV to load from the CPU tier.', [], () => [
    [unlabelled, read().gauges.requests.waitingForLoad],
  ]);
  gauge('gpu_blocks_capacity', 'GPU KV blocks per rank.', [], () => [[unlabelled, read().gauges.gpuBlocks.capacity]]);
  gauge('gpu_blocks_used', 'GPU blocks held by requests.', [], () => [[unlabelled, read().gauges.gpuBlocks.used]]);
  gauge('gpu_blocks_free', 'GPU blocks allocation may take (free, or cached and unreferenced).', [], () => [
    [unlabelled, read().gauges.gpuBlocks.free],
  ]);
  gauge('gpu_blocks_prefix_cached', 'GPU blocks in the prefix cache (held or not).', [], () => [[unlabelled, read().gauges.gpuBlocks.prefixCached]]);
  const cpu = (pick: (c: NonNullable<MonitoringSnapshot['gauges']['cpuBlocks']>) => number) => (): readonly Sample[] => {
    const tier = read().gauges.cpuBlocks;
    return tier === null ? [] : [[unlabelled, pick(tier)]];
  };
  gauge('cpu_blocks_capacity', 'Offloaded blocks the CPU tier holds at most.', [], cpu((c) => c.capacity));
  gauge('cpu_blocks_ready', 'CPU tier blocks ready to load (pinned ones included).', [], cpu((c) => c.ready));
  gauge('cpu_blocks_being_stored', 'CPU tier blocks whose store is in flight.', [], cpu((c) => c.beingStored));
  gauge('cpu_blocks_pinned', 'CPU tier blocks pinned by in-flight loads.', [], cpu((c) => c.pinned));
  gauge('cpu_blocks_free', 'CPU tier blocks holding nothing.', [], cpu((c) => c.free));
  gauge('transfer_jobs_in_flight', 'Transfer jobs scheduled and not finished on every rank.', ['direction'], () => {
    const inFlight = read().gauges.jobsInFlight;
    return [
      [label('direction', directionLabel('gpuToCpu')), inFlight.gpuToCpu],
      [label('direction', directionLabel('cpuToGpu')), inFlight.cpuToGpu],
    ];
  });
  gauge('ranks_alive', 'Rank threads alive.', [], () => [[unlabelled, read().gauges.ranksAlive.filter(Boolean).length]]);
  gauge('rank_up', '1 while the rank thread is alive, 0 once it died (until restarted).', ['rank'], () =>
    read().gauges.ranksAlive.map((alive, rank): Sample => [label('rank', String(rank)), alive ? 1 : 0]),
  );

  counter('preemptions_total', 'Requests that lost their computed KV and went back to the queue, by cause.', ['cause'], () =>
    read().monitor.preemptionCounts().map(([cause, count]): Sample => [label('cause', cause), count]),
  );
  counter('evicted_blocks_total', 'Cached blocks evicted to make room, by tier.', ['tier'], () => {
    const g = read().gauges;
    const samples: Sample[] = [[label('tier', 'gpu'), g.gpuBlocks.evictedTotal]];
    if (g.cpuBlocks !== null) samples.push([label('tier', 'cpu'), g.cpuBlocks.evictedTotal]);
    return samples;
  });
  counter('store_declined_blocks_total', 'Blocks the store policy declined to offload.', [], () => {
    const tier = read().gauges.cpuBlocks;
    return tier === null ? [] : [[unlabelled, tier.declinedTotal]];
  });
  counter('load_failed_blocks_total', 'Block loads that failed, by cause: injected and device (GPU block loads, summed over ranks), remote (blocks whose remote read failed, once per block).', ['cause'], () => {
    const failed = read().monitor.loadFailedBlocks;
    return LOAD_FAILURE_CAUSES.map((cause): Sample => [label('cause', cause), failed[cause]]);
  });
}
