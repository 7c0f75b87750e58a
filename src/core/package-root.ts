import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KvtierError } from './errors.js';
import { ERROR_CODES } from './error-codes.js';

let root: string | null = null;

/**
 * The folder holding kvtier's package.json, found by walking up from this
 * module, so the same code finds it from src/ (tests) and from dist/src/
 * (the built package).
 */
export function packageRoot(): string {
  if (root !== null) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'kvtier') {
      root = dir;
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new KvtierError(ERROR_CODES.build, `no kvtier package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

/**
 * A compiled worker entry, <package root>/dist/workers/<name>.js: worker
 * threads run compiled JavaScript, also when their parent runs from sources.
 */
export function compiledWorkerPath(name: string): string {
  return join(packageRoot(), 'dist', 'workers', `${name}.js`);
}
