import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EngineError } from '../core/errors.js';

let root: string | null = null;

/** The package root: the nearest ancestor directory whose package.json names kvtier. */
export function packageRoot(): string {
  if (root) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'kvtier') {
      root = dir;
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new EngineError('cannot find the kvtier package root');
    dir = parent;
  }
}

/**
 * The compiled worker script `dist/workers/<name>.js`. Worker threads run
 * compiled JavaScript, also when the engine itself runs from TypeScript sources.
 */
export function workerScript(name: string): string {
  const file = join(packageRoot(), 'dist', 'workers', `${name}.js`);
  if (!existsSync(file)) throw new EngineError(`worker script ${file} is missing: run \`npm run build\``);
  return file;
}
