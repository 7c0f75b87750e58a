import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * A service keeps one engine for as long as it runs, so a step must leave
 * nothing behind once its outputs are consumed. The engine runs in a child
 * started with --expose-gc (a full GC before each heap reading); this checks
 * memory, not time.
 */

const REPO = resolve(import.meta.dirname, '../..');
const SCRIPT = join(REPO, 'test', 'runtime', 'fixtures', 'step-heap.mjs');

interface HeapReading {
  readonly before: number;
  readonly after: number;
  readonly steps: number;
}

async function heapAcrossSteps(tp: number, warmupSteps: number, measuredSteps: number): Promise<HeapReading> {
  if (!existsSync(join(REPO, 'dist', 'src', 'index.js'))) throw new Error('dist/ is missing: build kvtier first (npm run build:ts)');
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', SCRIPT, String(tp), String(warmupSteps), String(measuredSteps)], {
    cwd: REPO,
    timeout: 50_000,
  });
  return JSON.parse(stdout) as HeapReading;
}

describe('a long-lived engine', () => {
  it('keeps a flat heap over thousands of steps (no per-step growth after GC)', async () => {
    // The warm-up lets compiled code and caches settle; what remains growing is held per step.
    const reading = await heapAcrossSteps(2, 2000, 3000);
    const bytesPerStep = (reading.after - reading.before) / reading.steps;
    // Each step carries ~1.7 KB of outputs; holding any of them for good shows far above this bound.
    expect(bytesPerStep).toBeLessThan(400);
  });
});
