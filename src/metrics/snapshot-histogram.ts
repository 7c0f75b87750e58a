import type { Metric, Registry } from 'prom-client';
import type { HistogramSeries } from './engine-monitor.js';

interface ExposedValue {
  readonly metricName: string;
  readonly labels: Readonly<Record<string, string>>;
  /** The series' own labels: prom-client formats each such object once and caches the text. */
  readonly sharedLabels: Readonly<Record<string, string>>;
  readonly value: number;
}

const NO_LABELS: Readonly<Record<string, string>> = Object.freeze({});
/** One `{ le }` object per bound value, shared by every series and scrape. */
const leLabels = new Map<number, Readonly<Record<string, string>>>();
function leLabel(bound: number): Readonly<Record<string, string>> {
  let label = leLabels.get(bound);
  if (label === undefined) {
    label = Object.freeze({ le: String(bound) });
    leLabels.set(bound, label);
  }
  return label;
}
const INF_LABEL = Object.freeze({ le: '+Inf' });

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
    const bucketName = `${this.name}_bucket`;
    for (const { labels, histogram } of this.series()) {
      let cumulative = 0;
      for (let i = 0; i < histogram.bounds.length; i++) {
        cumulative += histogram.counts[i];
        values.push({ metricName: bucketName, labels: leLabel(histogram.bounds[i]), sharedLabels: labels, value: cumulative });
      }
      values.push({ metricName: bucketName, labels: INF_LABEL, sharedLabels: labels, value: histogram.count });
      values.push({ metricName: `${this.name}_sum`, labels: NO_LABELS, sharedLabels: labels, value: histogram.sum });
      values.push({ metricName: `${this.name}_count`, labels: NO_LABELS, sharedLabels: labels, value: histogram.count });
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
