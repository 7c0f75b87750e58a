import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Engine, MODEL_PRESETS, referenceGenerate, type FinishedRequest } from '../../src/index.js';

/**
 * The library example of README.md, verbatim between the markers (the
 * README imports from 'kvtier', which resolves to src/index.ts's build), so
 * the documented code is type-checked by `npm run typecheck` and runs here.
 */
async function readmeExample(log: (...values: unknown[]) => void): Promise<FinishedRequest[]> {
  // --- README example start ---
  const engine = await Engine.create({
    model: 'tiny', // a preset, or a full model shape
    backend: 'host', // 'auto': cuda when a GPU is found
    tp: 2, // ranks, one worker thread each
    gpuBlocks: 256, // GPU KV blocks per rank
    cpuBlocks: 2048, // CPU tier size; turns offloading on
  });
  const finished: FinishedRequest[] = [];
  try {
    const system = Array.from({ length: 256 }, (_, i) => (i * 7919) % 32000);
    // A batch is validated whole and hashed off the event loop.
    await engine.addRequests([
      { id: 'a', promptTokens: [...system, 1, 2, 3], maxTokens: 8, seed: 1 },
      { id: 'long', promptTokens: [...system, 4], maxTokens: 500, seed: 2 },
    ]);
    const step = await engine.step(); // one step on every rank: both prompts are prefilled
    for (const [id, tokens] of step.newTokens) log(`${id} +${tokens.length} tokens`);
    finished.push(...step.finished);

    // Added now, 'b' finds the system prompt's blocks in the GPU prefix cache.
    engine.addRequest({ id: 'b', promptTokens: [...system, 5, 6], maxTokens: 8, seed: 3 });
    engine.abort('long'); // in any state; it finishes as 'aborted'
    finished.push(...(await engine.run())); // steps until nothing is pending
    for (const f of finished) log(f.id, f.finishReason, f.outputTokens.join(' '));

    const m = engine.metrics();
    log(`prompt ${m.tokens.prompt}, GPU prefix hits ${m.hits.gpuPrefixTokens}, computed ${m.tokens.prefillComputed}`);
  } finally {
    await engine.shutdown(); // stops the ranks, frees their memory
  }
  // --- README example end ---
  return finished;
}

describe('the README library example', () => {
  it('serves two requests, aborts the long one, reuses the shared prefix, and matches the reference model', async () => {
    const lines: string[] = [];
    const finished = await readmeExample((...values) => lines.push(values.map(String).join(' ')));
    const byId = new Map(finished.map((f) => [f.id, f]));
    expect([...byId.keys()].sort()).toEqual(['a', 'b', 'long']);
    expect(byId.get('long')?.finishReason).toBe('aborted');
    for (const id of ['a', 'b']) {
      const f = byId.get(id) as FinishedRequest;
      expect(f.finishReason).toBe('length');
      const expected = referenceGenerate(MODEL_PRESETS.tiny, { promptTokens: f.promptTokens, maxTokens: f.maxTokens, seed: f.seed, stopToken: null });
      expect(f.outputTokens).toEqual(expected.outputTokens);
    }
    expect(lines).toContain('a +1 tokens');
    // 'long' (scheduled right behind 'a') and 'b' each hit the system prompt's 16 full blocks.
    expect(lines.at(-1)).toBe('prompt 774, GPU prefix hits 512, computed 262');
  });

  it('is the code README.md shows', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const shown = /```ts\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const source = readFileSync(new URL(import.meta.url), 'utf8');
    const start = '// --- README example start ---';
    const tested = source.slice(source.indexOf(start) + start.length, source.indexOf('// --- README example end ---'));
    // Same statements, whatever the indentation; the test logs through `log`, the README through console.log.
    const statements = (code: string) =>
      code
        .split('\n')
        .map((line) => line.trim())
        .filter((line) => line !== '' && !line.startsWith('import '));
    expect(statements(tested).map((line) => line.replaceAll('log(', 'console.log('))).toEqual(statements(shown));
  });
});
