import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { staleSource } from './fresh-dist.js';

let root: string | null = null;

function tree(files: Record<string, number>): string {
  root = mkdtempSync(join(tmpdir(), 'kvtier-dist-'));
  mkdirSync(join(root, 'src'), { recursive: true });
  mkdirSync(join(root, 'workers'), { recursive: true });
  for (const [path, mtimeSeconds] of Object.entries(files)) {
    const full = join(root, path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, '');
    utimesSync(full, mtimeSeconds, mtimeSeconds);
  }
  return root;
}

afterEach(() => {
  if (root !== null) rmSync(root, { recursive: true, force: true });
  root = null;
});

describe('the test run rebuilds a stale dist/', () => {
  it('finds nothing to rebuild when every compiled file is newer than its source', () => {
    const dir = tree({ 'src/a.ts': 100, 'dist/src/a.js': 200, 'workers/w.ts': 100, 'dist/workers/w.js': 200 });
    expect(staleSource(dir)).toBeNull();
  });

  it('names a worker source edited after the last build', () => {
    const dir = tree({ 'src/a.ts': 100, 'dist/src/a.js': 200, 'workers/w.ts': 300, 'dist/workers/w.js': 200 });
    expect(staleSource(dir)).toBe(join('workers', 'w.ts'));
  });

  it('names a source file that was never compiled', () => {
    const dir = tree({ 'src/sub/new.ts': 100 });
    expect(staleSource(dir)).toBe(join('src', 'sub', 'new.ts'));
  });
});
