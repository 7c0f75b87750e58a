import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { ConfigError, TraceError } from '../core/errors.js';
import { jsonErrorSummary, printable, withoutBom } from '../core/safe-text.js';

/**
 * Mooncake request traces (FAST'25): one JSON object per line with
 * `timestamp` (ms from the trace start), `input_length`, `output_length` and
 * `hash_ids` (one id per 512-token prompt block; equal ids are equal, reusable
 * prefix blocks). Files are read line by line; a malformed line stops the
 * load with a TraceError naming the file, the line and the field.
 */

/** Tokens per hash id in a Mooncake trace. */
export const MOONCAKE_BLOCK_TOKENS = 512;

/** One trace request. Lengths are in replayed tokens (as written unless scaled by loadTrace). */
export interface TraceRecord {
  /** 1-based line number in the file. */
  readonly line: number;
  readonly timestampMs: number;
  readonly inputLength: number;
  readonly outputLength: number;
  readonly hashIds: readonly number[];
}

export interface TraceSliceOptions {
  /** Keep requests with timestamp in [start, end) seconds into the trace. */
  readonly timeWindow?: readonly [number, number] | null;
  /** Keep at most this many requests (after the time window), in file order. */
  readonly maxRequests?: number | null;
  /**
   * Divide every length by this factor (rounded up, minimum 1); each hash id
   * then stands for 512 / tokenScale tokens, which must be a whole number.
   */
  readonly tokenScale?: number;
}

export interface Trace {
  readonly file: string;
  readonly records: readonly TraceRecord[];
  /** Replayed tokens per hash id: 512 / tokenScale. */
  readonly blockTokens: number;
  readonly tokenScale: number;
  /** Start of the time window (ms into the trace); arrivals are measured from here. */
  readonly originMs: number;
}

/** Parses and validates one non-blank line. */
export function parseTraceLine(text: string, file: string, line: number): TraceRecord {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new TraceError(file, line, `invalid JSON: ${jsonErrorSummary(err)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TraceError(file, line, 'expected a JSON object');
  }
  const fields = value as Record<string, unknown>;
  const fail = (field: string, expected: string): never => {
    if (!(field in fields)) throw new TraceError(file, line, `field "${field}" is missing (expected ${expected})`);
    const got = describeJsonValue(fields[field]);
    throw new TraceError(file, line, `field "${field}": expected ${expected}, got ${got}`);
  };

  const timestampMs = fields.timestamp;
  if (typeof timestampMs !== 'number' || !Number.isFinite(timestampMs) || timestampMs < 0) {
    fail('timestamp', 'a number of milliseconds >= 0');
  }
  const inputLength = fields.input_length;
  if (!isIntegerAtLeast(inputLength, 1)) fail('input_length', 'an integer >= 1');
  const outputLength = fields.output_length;
  if (!isIntegerAtLeast(outputLength, 0)) fail('output_length', 'an integer >= 0');
  const hashIds = fields.hash_ids;
  if (!Array.isArray(hashIds)) fail('hash_ids', 'an array of integer ids');
  const ids = hashIds as unknown[];
  for (let i = 0; i < ids.length; i++) {
    if (!isIntegerAtLeast(ids[i], 0)) {
      throw new TraceError(file, line, `field "hash_ids": element ${i} is ${describeJsonValue(ids[i])}, expected an integer id >= 0`);
    }
  }
  const expectedIds = Math.ceil((inputLength as number) / MOONCAKE_BLOCK_TOKENS);
  if (ids.length !== expectedIds) {
    throw new TraceError(
      file,
      line,
      `field "hash_ids": ${ids.length} ids for input_length ${inputLength as number}, expected ${expectedIds} (one per ${MOONCAKE_BLOCK_TOKENS}-token block)`,
    );
  }
  return {
    line,
    timestampMs: timestampMs as number,
    inputLength: inputLength as number,
    outputLength: outputLength as number,
    hashIds: ids as number[],
  };
}

/** Yields the file's records in file order, skipping blank lines. */
export async function* readTraceRecords(file: string): AsyncGenerator<TraceRecord> {
  const unreadable = (err: unknown): ConfigError =>
    new ConfigError(`trace file "${file}" cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  let isFile: boolean;
  try {
    isFile = (await stat(file)).isFile();
  } catch (err) {
    throw unreadable(err);
  }
  if (!isFile) throw new ConfigError(`trace file "${file}" cannot be read: it is not a regular file`);
  const lines = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
  let line = 0;
  try {
    for await (const raw of lines) {
      line++;
      const text = line === 1 ? withoutBom(raw) : raw;
      if (text.trim() === '') continue;
      yield parseTraceLine(text, file, line);
    }
  } catch (err) {
    // A bad line is already a TraceError; anything else is the file failing under us.
    throw err instanceof TraceError ? err : unreadable(err);
  } finally {
    lines.close();
  }
}

/** Checks a token scale: a positive integer dividing the 512-token trace block. */
export function validateTokenScale(tokenScale: number): void {
  if (!Number.isInteger(tokenScale) || tokenScale < 1 || MOONCAKE_BLOCK_TOKENS % tokenScale !== 0) {
    throw new ConfigError(
      `token scale ${tokenScale}: must divide the ${MOONCAKE_BLOCK_TOKENS}-token trace block into whole tokens (1, 2, 4, ..., ${MOONCAKE_BLOCK_TOKENS})`,
    );
  }
}

/** A length divided by the token scale, rounded up, at least 1. */
export function scaleLength(length: number, tokenScale: number): number {
  return Math.max(1, Math.ceil(length / tokenScale));
}

/**
 * Reads a trace, keeps the requested slice and scales its lengths. Records
 * come back in arrival order (file order for equal timestamps).
 */
export async function loadTrace(file: string, options: TraceSliceOptions = {}): Promise<Trace> {
  const tokenScale = options.tokenScale ?? 1;
  validateTokenScale(tokenScale);
  const window = options.timeWindow ?? null;
  if (window !== null && !(window[0] >= 0 && window[1] > window[0])) {
    throw new ConfigError(`time window ${window[0]}:${window[1]}: expected 0 <= start < end (seconds)`);
  }
  const maxRequests = options.maxRequests ?? Infinity;
  const startMs = window === null ? 0 : window[0] * 1000;
  const endMs = window === null ? Infinity : window[1] * 1000;

  const records: TraceRecord[] = [];
  if (maxRequests > 0) {
    for await (const record of readTraceRecords(file)) {
      if (record.timestampMs < startMs || record.timestampMs >= endMs) continue;
      records.push({
        ...record,
        inputLength: scaleLength(record.inputLength, tokenScale),
        outputLength: scaleLength(record.outputLength, tokenScale),
      });
      if (records.length >= maxRequests) break;
    }
  }
  records.sort((a, b) => a.timestampMs - b.timestampMs || a.line - b.line);
  return { file, records, blockTokens: MOONCAKE_BLOCK_TOKENS / tokenScale, tokenScale, originMs: startMs };
}

function isIntegerAtLeast(value: unknown, min: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min;
}

/** A parsed JSON value for a message; JSON reads 1e400 as Infinity, which JSON.stringify would show as null. */
function describeJsonValue(value: unknown): string {
  if (typeof value === 'number' && !Number.isFinite(value)) return 'a value that is not a finite number (out of range)';
  return printable(JSON.stringify(value) ?? String(value));
}
