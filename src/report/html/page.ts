/**
 * A self-contained HTML report: inline CSS, inline SVG charts, no scripts and
 * no external resources, so it opens offline and from a file.
 */

export interface ReportSection {
  readonly heading: string;
  /** Plain text shown under the heading. */
  readonly text?: string;
  /** An inline SVG chart. */
  readonly svg?: string;
  /** A table: header row, then rows of cells. */
  readonly table?: { readonly header: readonly string[]; readonly rows: readonly (readonly string[])[] };
}

export interface ReportPage {
  readonly title: string;
  /** Lines under the title (what ran, with which settings). */
  readonly summary: readonly string[];
  readonly sections: readonly ReportSection[];
}

const STYLE = `
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .3rem; }
p.summary { margin: .2rem 0; color: #444; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: .85rem; margin: 1rem 0; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: right; } th { background: #f4f4f4; }
td:first-child, th:first-child { text-align: left; }
`;

/** Escapes text for HTML content and attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

export function renderPage(page: ReportPage): string {
  const parts: string[] = [
    '<!DOCTYPE html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(page.title)}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    `<h1>${escapeHtml(page.title)}</h1>`,
    ...page.summary.map((line) => `<p class="summary">${escapeHtml(line)}</p>`),
  ];
  for (const section of page.sections) {
    parts.push(`<section><h2>${escapeHtml(section.heading)}</h2>`);
    if (section.text !== undefined) parts.push(`<p>${escapeHtml(section.text)}</p>`);
    if (section.svg !== undefined) parts.push(`<figure>${section.svg}</figure>`);
    if (section.table !== undefined) {
      const { header, rows } = section.table;
      parts.push('<table>', `<tr>${header.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr>`);
      for (const row of rows) parts.push(`<tr>${row.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`);
      parts.push('</table>');
    }
    parts.push('</section>');
  }
  parts.push('</body>', '</html>', '');
  return parts.join('\n');
}
