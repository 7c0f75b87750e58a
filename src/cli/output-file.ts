import { constants } from 'node:fs';
import { access, stat, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { KvtierError } from '../core/errors.js';
import { UsageError } from './usage-error.js';

/** Writing an output file failed after the work was done (the report is already on stdout); exit code 1. */
export class OutputWriteError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_KVTIER_OUTPUT', message, options);
  }
}

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

/** Writes `value` as indented JSON with a final newline; a failure is one OutputWriteError line naming `flag` and the file. */
export async function writeJsonFile(file: string, value: unknown, flag = '--json'): Promise<void> {
  await writeTextFile(file, `${JSON.stringify(value, null, 2)}\n`, flag);
}

/** Writes `text` to `file`; a failure is one OutputWriteError line naming `flag` and the file. */
export async function writeTextFile(file: string, text: string, flag: string): Promise<void> {
  try {
    await writeFile(file, text);
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new OutputWriteError(`${flag} ${file}: cannot write the report: ${why}`, { cause: err });
  }
}
