import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, TraceError } from '../../src/core/errors.js';
import { loadTrace, parseTraceLine, scaleLength } from '../../src/workload/trace.js';
import { CONVERSATION_TRACE, SYNTHETIC_TRACE, traceLine, writeTraceFile } from './trace-files.js';

async function loadError(lines: string[]): Promise<TraceError> {
  const file = writeTraceFile(lines);
  const error = await loadTrace(file).then(
    () => null,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(TraceError);
  return error as TraceError;
}

const good = traceLine(0, 1000, 20, [7, 8]);

describe('Mooncake trace parsing', () => {
  it('reads every field of a well-formed line', () => {
    expect(parseTraceLine(traceLine(40, 1025, 3, [1, 2, 3]), 't.jsonl', 5)).toEqual({
      line: 5,
      timestampMs: 40,
      inputLength: 1025,
      outputLength: 3,
      hashIds: [1, 2, 3],
    });
  });

  it('ignores fields it does not know', () => {
    const line = JSON.stringify({ timestamp: 1, input_length: 10, output_length: 2, hash_ids: [4], model: 'x' });
    expect(parseTraceLine(line, 't.jsonl', 1).hashIds).toEqual([4]);
  });

  it('skips blank lines but keeps counting them for line numbers', async () => {
    const file = writeTraceFile([good, '', '   ', traceLine(5, 512, 1, [9])]);
    const trace = await loadTrace(file);
    expect(trace.records.map((r) => r.line)).toEqual([1, 4]);
  });

  it('names the file, the line and the problem for invalid JSON', async () => {
    const error = await loadError([good, '{"timestamp": 1,']);
    expect(error.code).toBe('ERR_KVTIER_TRACE');
    expect(error.line).toBe(2);
    expect(error.message).toMatch(/trace\.jsonl:2: invalid JSON/);
  });

  it('rejects a line that is not an object', async () => {
    const error = await loadError([good, good, '[1, 2]']);
    expect(error.message).toMatch(/:3: expected a JSON object/);
  });

  it.each([
    ['timestamp', JSON.stringify({ input_length: 10, output_length: 1, hash_ids: [1] }), /field "timestamp" is missing/],
    ['timestamp', traceLine(-5, 10, 1, [1]), /field "timestamp": expected a number of milliseconds >= 0, got -5/],
    ['input_length', traceLine(0, 0, 1, []), /field "input_length": expected an integer >= 1, got 0/],
    ['input_length', JSON.stringify({ timestamp: 0, input_length: '10', output_length: 1, hash_ids: [1] }), /field "input_length".*got "10"/],
    ['output_length', traceLine(0, 10, 2.5, [1]), /field "output_length": expected an integer >= 0, got 2.5/],
    ['hash_ids', JSON.stringify({ timestamp: 0, input_length: 10, output_length: 1, hash_ids: 3 }), /field "hash_ids": expected an array/],
    ['hash_ids', traceLine(0, 600, 1, [1, 1.5]), /field "hash_ids": element 1 is 1\.5/],
    ['hash_ids', traceLine(0, 600, 1, [1, -2]), /field "hash_ids": element 1 is -2/],
    ['hash_ids', traceLine(0, 1025, 1, [1, 2]), /field "hash_ids": 2 ids for input_length 1025, expected 3/],
    ['hash_ids', traceLine(0, 512, 1, [1, 2]), /field "hash_ids": 2 ids for input_length 512, expected 1/],
  ])('a bad %s on line 2 is reported with its line number', async (_field, bad, pattern) => {
    const error = await loadError([good, bad, good]);
    expect(error.line).toBe(2);
    expect(error.message).toMatch(/trace\.jsonl:2: /);
    expect(error.message).toMatch(pattern);
  });

  it('reports a missing file as a configuration error naming it', async () => {
    await expect(loadTrace('/nonexistent/trace.jsonl')).rejects.toThrow(ConfigError);
    await expect(loadTrace('/nonexistent/trace.jsonl')).rejects.toThrow(/"\/nonexistent\/trace\.jsonl" cannot be read: ENOENT/);
  });

  it('reports a folder given as the trace as a configuration error, not a read failure', async () => {
    const folder = dirname(writeTraceFile([traceLine(0, 1, 1, [1])]));
    await expect(loadTrace(folder)).rejects.toThrow(ConfigError);
    await expect(loadTrace(folder)).rejects.toThrow(/cannot be read: it is not a regular file/);
  });
});

describe('slicing and scaling a trace', () => {
  const lines = [
    traceLine(0, 100, 10, [1]),
    traceLine(1500, 600, 5, [1, 2]),
    traceLine(2000, 1100, 1, [1, 2, 3]),
    traceLine(2999, 50, 7, [4]),
    traceLine(3000, 70, 8, [5]),
  ];

  it('keeps requests whose timestamp falls in [start, end) seconds and measures arrivals from start', async () => {
    const trace = await loadTrace(writeTraceFile(lines), { timeWindow: [1.5, 3] });
    expect(trace.records.map((r) => r.timestampMs)).toEqual([1500, 2000, 2999]);
    expect(trace.originMs).toBe(1500);
  });

  it('keeps the first N requests of the window', async () => {
    const trace = await loadTrace(writeTraceFile(lines), { timeWindow: [1, 10], maxRequests: 2 });
    expect(trace.records.map((r) => r.line)).toEqual([2, 3]);
  });

  it('stops reading once N requests are kept, so later lines are not read', async () => {
    const trace = await loadTrace(writeTraceFile([...lines.slice(0, 2), 'not json']), { maxRequests: 2 });
    expect(trace.records).toHaveLength(2);
  });

  it('divides lengths by the token scale, rounding up to at least one token', async () => {
    const trace = await loadTrace(writeTraceFile(lines), { tokenScale: 8 });
    expect(trace.blockTokens).toBe(64);
    expect(trace.records.map((r) => [r.inputLength, r.outputLength])).toEqual([
      [13, 2],
      [75, 1],
      [138, 1],
      [7, 1],
      [9, 1],
    ]);
    expect(scaleLength(0, 4)).toBe(1);
  });

  it('keeps every hash id meaningful after scaling: the scaled prompt still needs all its blocks', async () => {
    const trace = await loadTrace(writeTraceFile(lines), { tokenScale: 512 });
    for (const record of trace.records) {
      expect(Math.ceil(record.inputLength / trace.blockTokens)).toBe(record.hashIds.length);
    }
  });

  it.each([3, 0, 1024, 2.5])('rejects token scale %s, which does not divide the 512-token block', async (scale) => {
    await expect(loadTrace(writeTraceFile(lines), { tokenScale: scale })).rejects.toThrow(/token scale .*must divide the 512-token trace block/);
  });

  it('rejects an empty or reversed time window', async () => {
    await expect(loadTrace(writeTraceFile(lines), { timeWindow: [3, 3] })).rejects.toThrow(/time window 3:3/);
  });

  it('returns requests in arrival order even when the file is not sorted', async () => {
    const trace = await loadTrace(writeTraceFile([traceLine(50, 10, 1, [1]), traceLine(10, 10, 1, [2]), traceLine(10, 10, 1, [3])]));
    expect(trace.records.map((r) => r.line)).toEqual([2, 3, 1]);
  });
});

describe.skipIf(!existsSync(CONVERSATION_TRACE))('the published Mooncake traces', () => {
  it('parses the conversation trace', async () => {
    const trace = await loadTrace(CONVERSATION_TRACE);
    expect(trace.records).toHaveLength(12031);
  });

  it('parses the synthetic trace', async () => {
    const trace = await loadTrace(SYNTHETIC_TRACE);
    expect(trace.records).toHaveLength(3993);
  });
});
