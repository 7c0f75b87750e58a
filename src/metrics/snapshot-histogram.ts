import type { Metric, Registry } from 'prom-client';
import type { HistogramSeries } from './engine-monitor.js';
import { unlabelled, type Labels } from './snapshot-values.js';

interface ExposedValue {
  readonly metricName: string;
  readonly labels: Labels;
  /** The line's labels: prom-client formats each such object once and caches the text. */
  readonly sharedLabels: Labels;
  readonly value: number;
}

/**
 * Each series' labels with `le` added, one frozen object per (series, bound),
 * kept as long as the series' labels object lives: prom-client formats the
 * text of an object passed as sharedLabels once and caches it, so after the
 * first scrape no bucket line is escaped or joined again.
 */
const bucketLabels = new WeakMap<object, Map<number, Labels>>();
function bucketLabel(series: Labels, bound: number): Labels {
  let byBound = bucketLabels.get(series);
  if (byBound === undefined) {
    byBound = new Map();
    bucketLabels.set(series, byBound);
  }
  let labels = byBound.get(bound);
  if (labels === undefined) {
    labels = Object.freeze({ ...series, le: bound === Number.POSITIVE_INFINITY ? '+Inf' : String(bound) });
    byBound.set(bound, labels);
  }
  return labels;
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
    const bucketName = `${this.name}_bucket`;
    for (const { labels, histogram } of this.series()) {
      let cumulative = 0;
      for (let i = 0; i < histogram.bounds.length; i++) {
        cumulative += histogram.counts[i];
        values.push({ metricName: bucketName, labels: unlabelled, sharedLabels: bucketLabel(labels, histogram.bounds[i]), value: cumulative });
      }
      values.push({ metricName: bucketName, labels: unlabelled, sharedLabels: bucketLabel(labels, Number.POSITIVE_INFINITY), value: histogram.count });
      values.push({ metricName: `${this.name}_sum`, labels: unlabelled, sharedLabels: labels, value: histogram.sum });
      values.push({ metricName: `${this.name}_count`, labels: unlabelled, sharedLabels: labels, value: histogram.count });
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
