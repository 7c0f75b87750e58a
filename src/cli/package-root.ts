import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder holding kvtier's package.json, found by walking up from this
 * module, so the same code finds it from src/ (tests) and from dist/src/
 * (the installed CLI).
 */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

/** A compiled worker entry: <package root>/dist/workers/<name>.js. */
export function compiledWorkerPath(name: string): string {
  return join(packageRoot(), 'dist', 'workers', `${name}.js`);
}
