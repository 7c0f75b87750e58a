import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { MachineDescription } from './machine.js';

/** One column of a results table: header, and how a row renders in it. */
export interface Column<Row> {
  readonly header: string;
  readonly cell: (row: Row) => string;
}

export interface BenchResults<Row> {
  readonly bench: string;
  readonly backend: string;
  readonly machine: MachineDescription;
  /** ISO time the bench finished. */
  readonly date: string;
  readonly results: readonly Row[];
}

export function textTable<Row>(rows: readonly Row[], columns: readonly Column<Row>[]): string {
  const cells = rows.map((row) => columns.map((c) => c.cell(row)));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i].length)));
  const line = (values: readonly string[]) => values.map((v, i) => v.padStart(widths[i])).join('  ');
  return [line(columns.map((c) => c.header)), ...cells.map(line)].join('\n');
}

export function markdownTable<Row>(rows: readonly Row[], columns: readonly Column<Row>[]): string {
  const header = `| ${columns.map((c) => c.header).join(' | ')} |`;
  const rule = `|${columns.map(() => '---:').join('|')}|`;
  return [header, rule, ...rows.map((r) => `| ${columns.map((c) => c.cell(r)).join(' | ')} |`)].join('\n');
}

export function markdownReport<Row>(results: BenchResults<Row>, columns: readonly Column<Row>[], notes: readonly string[] = []): string {
  const m = results.machine;
  return [
    `# kvtier bench ${results.bench} (${results.backend})`,
    '',
    `- Date: ${results.date}`,
    `- CPU: ${m.cpu}, ${m.memoryGiB} GiB`,
    `- GPU: ${m.gpu ?? 'none (host backend)'}${m.driver ? `, driver ${m.driver}` : ''}`,
    `- Node ${m.node}, ${m.os}`,
    ...notes.map((n) => `- ${n}`),
    '',
    markdownTable(results.results, columns),
    '',
  ].join('\n');
}

export async function writeBenchFiles<Row>(
  results: BenchResults<Row>,
  columns: readonly Column<Row>[],
  files: { json: string | null; markdown: string | null },
  notes: readonly string[] = [],
): Promise<void> {
  if (files.json !== null) {
    await mkdir(dirname(files.json), { recursive: true });
    await writeFile(files.json, `${JSON.stringify(results, null, 2)}\n`);
  }
  if (files.markdown !== null) {
    await mkdir(dirname(files.markdown), { recursive: true });
    await writeFile(files.markdown, markdownReport(results, columns, notes));
  }
}
