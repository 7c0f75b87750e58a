import type { Metric, Registry } from 'prom-client';

export type Labels = Readonly<Record<string, string>>;
export type Sample = readonly [Labels, number];

const NO_LABELS: Labels = Object.freeze({});
const labelCache = new Map<string, Map<string, Labels>>();

/**
 * The one frozen `{ [name]: value }` object for a label pair. prom-client
 * caches the formatted text of a series' labels per object, so reusing the
 * objects makes every scrape after the first skip escaping and joining.
 */
export function label(name: string, value: string): Labels {
  let byValue = labelCache.get(name);
  if (byValue === undefined) {
    byValue = new Map();
    labelCache.set(name, byValue);
  }
  let labels = byValue.get(value);
  if (labels === undefined) {
    labels = Object.freeze({ [name]: value });
    byValue.set(value, labels);
  }
  return labels;
}

export const unlabelled: Labels = NO_LABELS;

/**
 * A counter or gauge whose values live elsewhere: `values()` is read at
 * scrape time and exposed as is. prom-client's Counter and Gauge would hash
 * and validate every label set on every scrape just to be reset and refilled.
 */
class SnapshotValues {
  readonly aggregator = 'sum' as const;

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge',
    readonly labelNames: readonly string[],
    private readonly values: () => readonly Sample[],
  ) {}

  async get(): Promise<{ name: string; help: string; type: string; aggregator: 'sum'; values: { labels: Labels; sharedLabels: Labels; value: number }[] }> {
    const values = this.values().map(([labels, value]) => ({ labels: NO_LABELS, sharedLabels: labels, value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {}
}

/** Registers a counter or gauge read from `values` at every scrape. */
export function registerSnapshotValues(
  registry: Registry,
  name: string,
  help: string,
  type: 'counter' | 'gauge',
  labelNames: readonly string[],
  values: () => readonly Sample[],
): void {
  registry.registerMetric(new SnapshotValues(name, help, type, labelNames, values) as unknown as Metric);
}
