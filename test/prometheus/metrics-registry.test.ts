import { describe, expect, it } from 'vitest';
import type { EngineMetrics } from '../../src/runtime/engine-types.js';
import { createMetricsRegistry } from '../../src/prometheus/metrics-registry.js';
import { quietEngineMetrics } from '../support/engine-metrics.js';

/** A run's metrics with every counter the registry reads set to its own value. */
function metrics(overrides: Partial<EngineMetrics> = {}): EngineMetrics {
  return quietEngineMetrics({
    steps: 12,
    preemptions: 3,
    requests: { added: 10, finished: 7, aborted: 1, failed: 2 },
    tokens: { prompt: 1000, output: 80, prefillComputed: 400, recomputed: 0, promptReached: 1000 },
    hits: { gpuPrefixTokens: 350, cpuTierTokens: 250 },
    transfers: {
      gpuToCpu: { jobs: 5, failedJobs: 1, bytes: 4096, busyMs: 2, copyJobs: 2 },
      cpuToGpu: { jobs: 4, failedJobs: 0, bytes: 8192, busyMs: 1500, copyJobs: 4 },
    },
    loadFailures: { blocks: 2, requestsRecovered: 1 },
    storeFailures: 1,
    stepClock: { description: 'tiny on h100-sxm (NVIDIA H100 SXM 80GB, default)', modelledComputeMs: 0, forwardMs: 0 },
    ...overrides,
  });
}

describe('Prometheus metrics', () => {
  it('expose the engine counters with labels, read at scrape time', async () => {
    let current = metrics();
    const registry = createMetricsRegistry(() => current);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE kvtier_steps_total counter');
    expect(text).toContain('kvtier_steps_total 12');
    expect(text).toContain('kvtier_hit_tokens_total{tier="cpu"} 250');
    expect(text).toContain('kvtier_offload_bytes_total{direction="cpu_to_gpu"} 8192');
    expect(text).toContain('kvtier_offload_busy_seconds_total{direction="cpu_to_gpu"} 1.5');
    expect(text).toContain('kvtier_requests_total{state="failed"} 2');
    current = metrics({ steps: 40 });
    expect(await registry.metrics()).toContain('kvtier_steps_total 40');
  });

  it('take a name prefix', async () => {
    const text = await createMetricsRegistry(() => metrics(), 'svc_kv_').metrics();
    expect(text).toContain('svc_kv_preemptions_total 3');
    expect(text).not.toContain('kvtier_');
  });
});
