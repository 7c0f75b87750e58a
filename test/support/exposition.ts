import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';

/**
 * A scrape of /metrics, parsed by parse-prometheus-text-format. That parser
 * merges every series of a histogram whose series carry labels besides `le`
 * into one (it keys buckets by `le` alone), so histogram families are read
 * as untyped samples (`name_bucket`, `name_sum`, `name_count`, labels intact)
 * and put back together here; their declared types are still checked.
 */

type Labels = Readonly<Record<string, string>>;

export interface HistogramSeries {
  readonly labels: Labels;
  /** [upper bound, cumulative count] in exposition order; the last bound is +Infinity. */
  readonly buckets: readonly (readonly [number, number])[];
  readonly sum: number;
  readonly count: number;
}

interface Sample {
  readonly labels: Labels;
  readonly value: number;
}

function sameLabels(a: Labels, b: Labels): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

function withoutLe(labels: Labels): Labels {
  const { le: _le, ...rest } = labels;
  return rest;
}

export class Exposition {
  /** Family name -> declared type (COUNTER, GAUGE, HISTOGRAM...). */
  readonly types = new Map<string, string>();
  private readonly samples = new Map<string, Sample[]>();

  constructor(readonly text: string) {
    const typed = parsePrometheusTextFormat(text);
    for (const family of typed) this.types.set(family.name, family.type);
    const histogramTypeLines = new Set(
      [...this.types].filter(([, type]) => type === 'HISTOGRAM').map(([name]) => `# TYPE ${name} histogram`),
    );
    const untypedText = text
      .split('\n')
      .map((line) => (histogramTypeLines.has(line) ? `${line.slice(0, -'histogram'.length)}untyped` : line))
      .join('\n');
    for (const family of parsePrometheusTextFormat(untypedText) as ParsedFamily[]) {
      const list = this.samples.get(family.name) ?? [];
      for (const m of family.metrics) if (m.value !== undefined) list.push({ labels: m.labels ?? {}, value: Number(m.value) });
      this.samples.set(family.name, list);
    }
  }

  /** Names of every family the scrape declares. */
  names(): string[] {
    return [...this.types.keys()];
  }

  /** The value of the one sample of `name` with exactly `labels`; throws when there is none. */
  value(name: string, labels: Labels = {}): number {
    const sample = (this.samples.get(name) ?? []).find((s) => sameLabels(s.labels, labels));
    if (sample === undefined) throw new Error(`no sample ${name}${JSON.stringify(labels)} in the scrape`);
    return sample.value;
  }

  /** Every sample of a counter or gauge family. */
  series(name: string): readonly Sample[] {
    return this.samples.get(name) ?? [];
  }

  /** Every series of histogram `name`, by its labels (without `le`). */
  histogram(name: string): HistogramSeries[] {
    if (this.types.get(name) !== 'HISTOGRAM') throw new Error(`${name} is not a histogram in the scrape (${this.types.get(name)})`);
    const out: { labels: Labels; buckets: [number, number][]; sum: number; count: number }[] = [];
    const seriesFor = (labels: Labels) => {
      let series = out.find((s) => sameLabels(s.labels, labels));
      if (series === undefined) {
        series = { labels, buckets: [], sum: Number.NaN, count: Number.NaN };
        out.push(series);
      }
      return series;
    };
    for (const s of this.samples.get(`${name}_bucket`) ?? []) {
      const le = s.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(s.labels.le);
      seriesFor(withoutLe(s.labels)).buckets.push([le, s.value]);
    }
    for (const s of this.samples.get(`${name}_sum`) ?? []) seriesFor(s.labels).sum = s.value;
    for (const s of this.samples.get(`${name}_count`) ?? []) seriesFor(s.labels).count = s.value;
    return out;
  }
}

/** GETs `url` and parses the answer. */
export async function scrape(url: string): Promise<Exposition> {
  const response = await fetch(url);
  if (response.status !== 200) throw new Error(`GET ${url}: ${response.status}`);
  return new Exposition(await response.text());
}
