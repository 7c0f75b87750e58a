import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRunArgs } from '../../src/cli/run-config.js';

/** A config file gives numbers as JSON numbers: a quoted number is refused for every numeric key, naming it. */

function configFile(values: Record<string, unknown>): string {
  const file = join(mkdtempSync(join(tmpdir(), 'kvtier-numbers-')), 'run.json');
  writeFileSync(file, JSON.stringify(values));
  return file;
}

describe('numbers in a run config file', () => {
  it.each([
    ['slowStepMs', '5'],
    ['metricsPort', ' 0 '],
    ['metricsLingerMs', '100'],
    ['remoteTimeoutMs', '300'],
    ['remoteWriteAttempts', '3'],
    ['remoteRetryBackoffMs', '100'],
  ])('%s given as the string %j is refused, naming the key', (key, value) => {
    expect(() => parseRunArgs(['--config', configFile({ [key]: value })])).toThrow(new RegExp(`^key "${key}" in .*run\\.json: invalid value .*expected a number`));
  });

  it('the same values as JSON numbers are taken', () => {
    const config = parseRunArgs(['--config', configFile({ slowStepMs: 5, metricsPort: 0, metricsLingerMs: 100 })]);
    expect(config.monitoring).toMatchObject({ slowStepMs: 5, metricsPort: 0, metricsLingerMs: 100 });
  });
});
