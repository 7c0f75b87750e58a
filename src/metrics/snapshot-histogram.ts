import type { Metric, Registry } from 'prom-client';
import type { HistogramSeries } from './engine-monitor.js';

interface ExposedValue {
  readonly metricName: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/**
 * A Prometheus histogram whose buckets live elsewhere (Histogram objects the
 * engine updates): at scrape time it turns their counts into cumulative
 * `_bucket{le}` series plus `_sum` and `_count`. prom-client's own Histogram
 * cannot be loaded from counts, only fed one observation at a time.
 */
class SnapshotHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum' as const;
  readonly labelNames: readonly string[];

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly string[],
    private readonly series: () => readonly HistogramSeries[],
  ) {
    this.labelNames = labelNames;
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: 'sum'; values: ExposedValue[] }> {
    const values: ExposedValue[] = [];
    for (const { labels, histogram } of this.series()) {
      let cumulative = 0;
      histogram.bounds.forEach((bound, i) => {
        cumulative += histogram.counts[i];
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: String(bound) }, value: cumulative });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: histogram.count });
      values.push({ metricName: `${this.name}_sum`, labels: { ...labels }, value: histogram.sum });
      values.push({ metricName: `${this.name}_count`, labels: { ...labels }, value: histogram.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {}
}

/** Registers a histogram read from `series` at every scrape. */
export function registerSnapshotHistogram(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly string[],
  series: () => readonly HistogramSeries[],
): void {
  registry.registerMetric(new SnapshotHistogram(name, help, labelNames, series) as unknown as Metric);
}
