import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkOutputFile, writeJsonFile } from '../../src/cli/output-file.js';
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
});
