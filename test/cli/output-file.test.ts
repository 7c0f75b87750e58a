import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliExitFor } from '../../src/cli/exit-codes.js';
import { checkOutputFile, OutputWriteError, writeJsonFile } from '../../src/cli/output-file.js';
import { UsageError } from '../../src/cli/usage-error.js';

const folder = () => mkdtempSync(join(tmpdir(), 'kvtier-out-'));

describe('output files are checked before the work starts', () => {
  it('accepts a new file in an existing folder, and an existing file', async () => {
    const dir = folder();
    await expect(checkOutputFile('--json', join(dir, 'new.json'))).resolves.toBeUndefined();
    writeFileSync(join(dir, 'old.json'), '{}');
    await expect(checkOutputFile('--json', join(dir, 'old.json'))).resolves.toBeUndefined();
  });

  it('refuses a file in a folder that does not exist, naming the flag', async () => {
    const file = join(folder(), 'missing', 'report.json');
    await expect(checkOutputFile('--json', file)).rejects.toThrow(new UsageError(`--json ${file}: cannot write there: its folder does not exist`));
  });

  it('refuses a folder', async () => {
    const dir = folder();
    await expect(checkOutputFile('--json', dir)).rejects.toThrow(new UsageError(`--json ${dir}: cannot write there: it is not a regular file`));
  });

  it('writes indented JSON ending in a newline', async () => {
    const file = join(folder(), 'out.json');
    await writeJsonFile(file, { a: [1] });
    expect(readFileSync(file, 'utf8')).toBe('{\n  "a": [\n    1\n  ]\n}\n');
  });

  it('a write that fails after the run is one line naming the flag and the file, never a stack trace', async () => {
    // The folder checked before the run is gone when the report is written.
    const file = join(folder(), 'gone', 'report.json');
    const error = await writeJsonFile(file, { a: 1 }, '--json').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutputWriteError);
    const exit = cliExitFor(error);
    expect(exit.code).toBe(1);
    expect(exit.message).toBe(`kvtier: --json ${file}: cannot write the report: ENOENT (ERR_KVTIER_OUTPUT)`);
  });
});
