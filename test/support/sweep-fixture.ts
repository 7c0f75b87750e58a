import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSweepPolicy, runSweep, type SweepResult } from '../../src/bench/sweep.js';

/** A Mooncake trace file of the given lines (objects), in a fresh temporary directory. */
export function traceFile(lines: readonly object[]): string {
  const file = join(mkdtempSync(join(tmpdir(), 'kvtier-sweep-')), 'trace.jsonl');
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return file;
}

/**
 * Conversations that come back one turn later with their previous prompt as
 * prefix, between one-off prompts, so a small CPU tier holds only part of
 * what returns. At token scale 64 a trace block is 8 tokens; requests arrive
 * 4 steps apart.
 */
export function conversationLines(conversations = 6, oneOffsBetween = 2): object[] {
  const lines: object[] = [];
  let nextHash = 1000;
  let t = 0;
  const first: number[][] = [];
  for (let c = 0; c < conversations; c++) {
    const ids = [1 + c * 4, 2 + c * 4, 3 + c * 4, 4 + c * 4];
    first.push(ids);
    lines.push({ timestamp: t, input_length: 2048, output_length: 256, hash_ids: ids });
    t += 4000;
    for (let o = 0; o < oneOffsBetween; o++) {
      lines.push({ timestamp: t, input_length: 2048, output_length: 256, hash_ids: [nextHash++, nextHash++, nextHash++, nextHash++] });
      t += 4000;
    }
  }
  for (const ids of first) {
    lines.push({ timestamp: t, input_length: 2560, output_length: 256, hash_ids: [...ids, nextHash++] });
    t += 4000;
  }
  return lines;
}

/** A simulated sweep of the first 100 conversation-trace lines over a 16-block GPU pool, for report tests. */
export function smallConversationSweep(cpuBlocks: readonly number[], policies: readonly string[]): Promise<SweepResult> {
  return runSweep({
    traceFile: traceFile(conversationLines()),
    maxRequests: 100,
    tokenScale: 64,
    gpuBlocks: 16,
    blockSize: 4,
    offloadFactor: 1,
    cpuBlocks: [...cpuBlocks],
    policies: policies.map(parseSweepPolicy),
  });
}
