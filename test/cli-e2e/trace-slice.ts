import { readFileSync } from 'node:fs';

/**
 * What a slice of a Mooncake trace asks of a replay, read straight from the
 * file (independently of kvtier's own trace loader): how many requests, and
 * how many prompt and output tokens after dividing lengths by the token
 * scale (rounded up, at least 1).
 */
export interface TraceSliceTotals {
  readonly requests: number;
  readonly promptTokens: number;
  readonly outputTokens: number;
  /** Latest arrival, ms after the slice's start. */
  readonly lastArrivalMs: number;
}

export interface SliceOptions {
  readonly tokenScale: number;
  readonly maxRequests?: number;
  /** Seconds, [start, end). */
  readonly window?: readonly [number, number];
}

export function traceSliceTotals(file: string, options: SliceOptions): TraceSliceTotals {
  const [startS, endS] = options.window ?? [0, Infinity];
  const scaled = (n: number) => Math.max(1, Math.ceil(n / options.tokenScale));
  let requests = 0;
  let promptTokens = 0;
  let outputTokens = 0;
  let lastArrivalMs = 0;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    const record = JSON.parse(line) as { timestamp: number; input_length: number; output_length: number };
    if (record.timestamp < startS * 1000 || record.timestamp >= endS * 1000) continue;
    requests++;
    promptTokens += scaled(record.input_length);
    outputTokens += scaled(record.output_length);
    lastArrivalMs = Math.max(lastArrivalMs, record.timestamp - startS * 1000);
    if (requests === options.maxRequests) break;
  }
  return { requests, promptTokens, outputTokens, lastArrivalMs };
}
