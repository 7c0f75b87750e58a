import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';

/**
 * Rank and pool workers run the compiled `dist/` tree while the tests import
 * `src/` directly, so a test run after editing a worker (or anything it
 * imports) would otherwise exercise stale code. Before any test runs, this
 * rebuilds `dist/` when a source file is newer than its compiled output.
 */

const ROOT = join(import.meta.dirname, '..', '..');
const SOURCE_DIRS = ['src', 'workers'];

function* typescriptFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* typescriptFiles(path);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) yield path;
  }
}

function mtimeOrNull(path: string): number | null {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return null;
  }
}

/** The first source file whose compiled output is missing or older, or null when dist/ is current. */
export function staleSource(root: string = ROOT): string | null {
  for (const dir of SOURCE_DIRS) {
    for (const source of typescriptFiles(join(root, dir))) {
      const rel = relative(root, source);
      const compiled = mtimeOrNull(join(root, 'dist', rel.replace(/\.ts$/, '.js')));
      if (compiled === null || compiled < statSync(source).mtimeMs) return rel;
    }
  }
  return null;
}

export default function setup(): void {
  const stale = staleSource();
  if (stale === null) return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  process.stderr.write(`dist/ is older than ${stale}: rebuilding with tsc -p tsconfig.build.json\n`);
  try {
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
  } catch {
    throw new Error(`dist/ is stale (${stale} changed) and tsc -p tsconfig.build.json failed: fix the build before testing`);
  }
}
