import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A Mooncake trace line for a prompt of `inputLength` tokens made of `hashIds`. */
export function traceLine(timestamp: number, inputLength: number, outputLength: number, hashIds: number[]): string {
  return JSON.stringify({ timestamp, input_length: inputLength, output_length: outputLength, hash_ids: hashIds });
}

/** Writes `lines` to a fresh temporary file and returns its path. */
export function writeTraceFile(lines: readonly string[], name = 'trace.jsonl'): string {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-trace-'));
  const file = join(dir, name);
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

export const CONVERSATION_TRACE = '/work/shared/traces/mooncake/conversation_trace.jsonl';
export const SYNTHETIC_TRACE = '/work/shared/traces/mooncake/synthetic_trace.jsonl';
