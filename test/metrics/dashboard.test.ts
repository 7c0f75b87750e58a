import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createMetricsRegistry } from '../../src/prometheus/metrics-registry.js';
import { withEngine } from '../e2e/helpers.js';

/**
 * dashboards/kvtier.json is imported into Grafana as is: every series its
 * PromQL names must be one the registry exports, so renaming a metric without
 * the dashboard fails here rather than as an empty panel.
 */

const DASHBOARD = join(resolve(import.meta.dirname, '../..'), 'dashboards', 'kvtier.json');

interface Panel {
  readonly type: string;
  readonly title?: string;
  readonly targets?: readonly { readonly expr: string }[];
  readonly panels?: readonly Panel[];
}

interface Dashboard {
  readonly panels: readonly Panel[];
  readonly templating: { readonly list: readonly { readonly definition?: string }[] };
}

function allPanels(panels: readonly Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

/** The kvtier_* identifiers of a PromQL expression, outside quoted strings. */
function metricNames(expr: string): string[] {
  const unquoted = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  return [...unquoted.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)].map((m) => m[0]).filter((id) => id.startsWith('kvtier_'));
}

/** Series names an engine's registry exports: counter and gauge names, and each histogram's _bucket, _sum and _count. */
async function exportedSeries(): Promise<Map<string, string>> {
  return withEngine({ tp: 1, gpuBlocks: 16, cpuBlocks: 64 }, async (engine) => {
    const series = new Map<string, string>();
    for (const metric of await createMetricsRegistry(engine).getMetricsAsJSON()) {
      const type = String(metric.type);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) series.set(`${metric.name}${suffix}`, type);
      else series.set(metric.name, type);
    }
    return series;
  });
}

describe('the Grafana dashboard', () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
  const panels = allPanels(dashboard.panels).filter((p) => p.type !== 'row');
  const exprs = [
    ...panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
    ...dashboard.templating.list.flatMap((v) => (v.definition === undefined ? [] : [v.definition])),
  ];

  it('queries only series the registry exports', async () => {
    const exported = await exportedSeries();
    const used = new Set(exprs.flatMap(metricNames));
    expect(used.size).toBeGreaterThan(20);
    expect([...used].filter((name) => !exported.has(name))).toEqual([]);
  });

  it('takes quantiles only of histogram buckets, and rates only of counters and histograms', async () => {
    const exported = await exportedSeries();
    for (const expr of exprs) {
      for (const name of metricNames(expr)) {
        if (expr.includes(`histogram_quantile`) && name.endsWith('_bucket')) expect(exported.get(name), expr).toBe('histogram');
        if (expr.includes(`rate(${name}`) || expr.includes(`increase(${name}`)) expect(['counter', 'histogram'], expr).toContain(exported.get(name));
      }
    }
  });

  it('has the panels a serving team watches', () => {
    const titles = panels.map((p) => p.title);
    for (const title of ['Time to first token', 'Time per output token', 'Prompt tokens served by tier', 'Transfer throughput', 'GPU KV blocks', 'CPU tier blocks', 'Preemptions per second', 'Failures']) {
      expect(titles).toContain(title);
    }
    const ttft = panels.find((p) => p.title === 'Time to first token')!;
    expect(ttft.targets!.every((t) => t.expr.startsWith('histogram_quantile('))).toBe(true);
  });

  it('shows tier shares of the prompt tokens reached, which hits and first computations add up to', () => {
    // hit_tokens{gpu_prefix} + hit_tokens{cpu} + prefill_computed - recomputed = prompt_reached, counted at the
    // same moments: the stacked shares add up to 100%. Shares of prompt tokens received could pass it.
    const served = panels.find((p) => p.title === 'Prompt tokens served by tier')!;
    const [hits, computed] = served.targets!.map((t) => t.expr);
    expect(hits).toMatch(/kvtier_hit_tokens_total\{[^}]*tier=~"gpu_prefix\|cpu"/);
    expect(computed).toMatch(/kind="prefill_computed".*-.*kind="recomputed"/);
    for (const expr of [hits, computed]) {
      expect(expr).toMatch(/\/ .*kind="prompt_reached"/);
      expect(expr).not.toContain('kind="prompt"');
    }
  });
});
