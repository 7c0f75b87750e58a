import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * What a program that installed kvtier can import: the library at 'kvtier',
 * the test internals only at 'kvtier/testing', and no module by its path.
 * Resolved by Node itself from the package's own directory (the built tree).
 */

const ROOT = join(import.meta.dirname, '..', '..');

function evaluate(code: string): unknown {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: ROOT, encoding: 'utf8' });
  return JSON.parse(out);
}

describe('the package entry points', () => {
  it('the library entry exposes the engine with no switches or probes', () => {
    const seen = evaluate(`
      const k = await import('kvtier');
      const methods = Object.getOwnPropertyNames(k.Engine.prototype);
      console.log(JSON.stringify({ exports: Object.keys(k), methods }));
    `) as { exports: string[]; methods: string[] };
    expect(seen.exports).toContain('Engine');
    expect(seen.exports).toEqual(expect.arrayContaining(['ServingEngine', 'startServer', 'QueueFullError', 'RequestAbortedError', 'ServingClosedError']));
    expect(seen.exports.filter((name) => /switch|probe|testing/i.test(name))).toEqual([]);
    expect(seen.methods).toEqual(expect.arrayContaining(['addRequest', 'step', 'run', 'metrics', 'shutdown']));
    for (const probe of ['holdings', 'rankStates', 'transferLogs', 'faultStats', 'pendingJobsPerRank']) {
      expect(seen.methods).not.toContain(probe);
    }
  });

  it("'kvtier/testing' gives the switches and the probe, and modules are not importable by path", () => {
    const seen = evaluate(`
      const t = await import('kvtier/testing');
      let deep = null;
      try { await import('kvtier/dist/src/runtime/engine.js'); } catch (error) { deep = error.code; }
      console.log(JSON.stringify({ exports: Object.keys(t).sort(), deep }));
    `) as { exports: string[]; deep: string | null };
    expect(seen.exports).toEqual(['EngineProbe', 'probe', 'withSwitches']);
    expect(seen.deep).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });
});
