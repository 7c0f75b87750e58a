import { constants, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { access, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { KvtierError } from '../core/errors.js';
import { UsageError } from './usage-error.js';
import { ERROR_CODES } from '../core/error-codes.js';

/** Writing an output file failed after the work was done (the report is already on stdout); exit code 1. */
export class OutputWriteError extends KvtierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ERROR_CODES.output, message, options);
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

/** A file a command reads or writes, with the flag (or config key) that names it. */
export interface NamedFile {
  readonly flag: string;
  readonly file: string;
}

/**
 * Refuses outputs that name one of the command's inputs (writing there would
 * destroy it) or one another (one report would be lost), however the path is
 * spelled (`X`, `./X`, an absolute path, a symbolic link). A usage error names
 * both flags.
 */
export function checkOutputsApart(outputs: readonly NamedFile[], inputs: readonly NamedFile[]): void {
  const seen: (NamedFile & { readonly path: string })[] = inputs.map((f) => ({ ...f, path: canonicalPath(f.file) }));
  const inputCount = seen.length;
  for (const output of outputs) {
    const path = canonicalPath(output.file);
    const clash = seen.findIndex((other) => other.path === path);
    if (clash >= 0 && clash < inputCount) {
      const input = seen[clash];
      throw new UsageError(`${output.flag} ${output.file}: ${input.flag} ${input.file} is the same file, an input of this command; writing there would overwrite it`);
    }
    if (clash >= 0) {
      const other = seen[clash];
      throw new UsageError(`${output.flag} ${output.file}: ${other.flag} ${other.file} is the same file; give each output a file of its own`);
    }
    seen.push({ ...output, path });
  }
}

/** A path as the file system resolves it: symbolic links followed, also for a file (or a link's target) that does not exist yet. */
export function canonicalPath(file: string, depth = 0): string {
  const path = resolve(file);
  try {
    return realpathSync(path);
  } catch {
    // A link whose target does not exist yet is its target: writing through it creates that file.
    const link = lstatSync(path, { throwIfNoEntry: false });
    if (link?.isSymbolicLink() && depth < 16) return canonicalPath(resolve(dirname(path), readlinkSync(path)), depth + 1);
    try {
      return join(realpathSync(dirname(path)), basename(path));
    } catch {
      return path;
    }
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
