import { existsSync } from 'node:fs';
import { compiledWorkerPath } from '../core/package-root.js';
import { EngineError } from '../core/errors.js';

/** The compiled worker script `dist/workers/<name>.js`, which must exist. */
export function workerScript(name: string): string {
  const file = compiledWorkerPath(name);
  if (!existsSync(file)) throw new EngineError(`worker script ${file} is missing: run \`npm run build\``);
  return file;
}
