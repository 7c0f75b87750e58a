/**
 * "label: value" lines with the labels right-aligned, so values start in one
 * column and every line still reads "label: value". An empty label continues
 * the row above.
 */
export function labeledRows(rows: readonly (readonly [label: string, value: string])[]): string {
  const width = Math.max(0, ...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => (label === '' ? `${' '.repeat(width)}  ${value}` : `${label.padStart(width)}: ${value}`)).join('\n');
}
