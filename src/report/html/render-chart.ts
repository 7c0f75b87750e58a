import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

/**
 * Renders a Vega-Lite spec to an SVG string in Node, with Vega's SVG string
 * renderer: no canvas, no browser, no network (data must be inline).
 */
export type ChartSpec = TopLevelSpec;

const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';

/** Shared look of every chart: a readable font, no outer border. */
const CONFIG = {
  font: FONT,
  view: { stroke: null },
  axis: { labelFontSize: 11, titleFontSize: 12 },
  legend: { labelFontSize: 11, titleFontSize: 12, labelLimit: 0 },
  title: { fontSize: 14, anchor: 'start' },
} as const;

export async function renderChartSvg(spec: ChartSpec): Promise<string> {
  const withConfig = { ...spec, config: { ...CONFIG, ...(spec as { config?: object }).config } } as TopLevelSpec;
  const compiled = compile(withConfig).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
