import { pino, type Logger } from 'pino';

export type LogFormat = 'pretty' | 'json';

export interface LoggerOptions {
  /** pino level name: trace, debug, info, warn, error, fatal, silent. */
  readonly level: string;
  readonly format: LogFormat;
  /** Where lines go; default stderr. */
  readonly write?: (line: string) => void;
}

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every pino line carries that the text format shows otherwise or not at all. */
const HIDDEN = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'name']);

/** One pino JSON line as `12:00:01.250 WARN  message key=value ...`. */
export function formatPrettyLine(json: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const time = typeof record.time === 'number' ? new Date(record.time).toISOString().slice(11, 23) : '';
  const level = (LEVEL_NAMES[record.level as number] ?? String(record.level)).padEnd(5);
  const fields = Object.entries(record)
    .filter(([key]) => !HIDDEN.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' ? (/\s/.test(value) ? JSON.stringify(value) : value) : JSON.stringify(value)}`);
  return `${time} ${level} ${String(record.msg ?? '')}${fields.length > 0 ? ` ${fields.join(' ')}` : ''}\n`;
}

/**
 * The CLI's logger: pino writing to stderr (stdout carries the report), as
 * JSON lines or as one readable line per record. Writes are synchronous, so
 * a line logged right before the process ends is never lost, and no
 * transport worker thread is started.
 */
export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const stream = { write: options.format === 'json' ? write : (line: string) => write(formatPrettyLine(line)) };
  return pino({ level: options.level, base: { name: 'kvtier' } }, stream);
}
