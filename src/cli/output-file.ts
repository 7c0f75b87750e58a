import { constants } from 'node:fs';
import { access, stat, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { UsageError } from './usage-error.js';

/**
 * Output files (--json) are checked before the work starts, so a typo in
 * the path fails at once with exit code 2 instead of after a long run.
 */

/** Throws a UsageError naming `flag` unless `file` can be created or overwritten. */
export async function checkOutputFile(flag: string, file: string): Promise<void> {
  const path = resolve(file);
  const existing = await stat(path).catch(() => null);
  if (existing !== null && !existing.isFile()) throw new UsageError(`${flag} ${file}: cannot write there: it is not a regular file`);
  const target = existing !== null ? path : dirname(path);
  try {
    await access(target, constants.W_OK);
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'its folder does not exist' : ((err as NodeJS.ErrnoException).code ?? String(err));
    throw new UsageError(`${flag} ${file}: cannot write there: ${why}`);
  }
}

/** Writes `value` as indented JSON with a final newline. */
export async function writeJsonFile(file: string, value: unknown): Promise<void> {
  await writeFile(file, `${JSON.stringify(value, null, 2)}\n`);
}
