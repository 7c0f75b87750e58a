import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRunArgs } from '../../src/cli/run-config.js';
import { usageMessage } from './run-usage.js';

/** Writes `text` as config file `name` in a fresh folder and returns its path. */
function configFile(name: string, text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'kvtier-yaml-')), name);
  writeFileSync(file, text);
  return file;
}


const SETTINGS_YAML = [
  '# a run on a small pool',
  'tp: 2',
  'gpuBlocks: 64',
  'cpuBytes: 1MiB',
  'storePolicy: on-evict',
  'offload: true',
  'timeWindow: [0, 10]',
  'trace: traces/t.jsonl',
  '',
].join('\n');

describe('YAML config files', () => {
  it.each(['run.yaml', 'run.yml'])('reads the same settings from %s as from JSON', (name) => {
    const yaml = parseRunArgs(['--config', configFile(name, SETTINGS_YAML)]);
    const json = parseRunArgs([
      '--config',
      configFile('run.json', JSON.stringify({ tp: 2, gpuBlocks: 64, cpuBytes: '1MiB', storePolicy: 'on-evict', offload: true, timeWindow: [0, 10], trace: 'traces/t.jsonl' })),
    ]);
    expect(yaml).toMatchObject({ tp: 2, gpuBlocks: 64, cpuBytes: 2 ** 20, storePolicy: 'on-evict', offload: true });
    expect({ ...yaml, workload: { ...yaml.workload, file: '' } }).toEqual({ ...json, workload: { ...json.workload, file: '' } });
  });

  it('tells YAML from JSON by content when the name says neither', () => {
    expect(parseRunArgs(['--config', configFile('run.conf', 'tp: 2\ngpuBlocks: 64\n')])).toMatchObject({ tp: 2, gpuBlocks: 64 });
    expect(parseRunArgs(['--config', configFile('run.conf', '{"tp": 2, "gpuBlocks": 64}')])).toMatchObject({ tp: 2, gpuBlocks: 64 });
  });

  it('keeps YAML 1.2 meanings: "no" is text, so a flag written as no is refused, naming the key, file and line', () => {
    const file = configFile('run.yaml', 'tp: 2\noffload: no\n');
    expect(usageMessage(['--config', file])).toBe(`key "offload" in ${file}:2: invalid value "no": expected true or false`);
  });

  it('names the file, line and column of a syntax error, without echoing the file', () => {
    const file = configFile('run.yaml', 'tp: 2\ngpuBlocks: [64,\nsecret: hunter2\n');
    const message = usageMessage(['--config', file]);
    expect(message).toMatch(new RegExp(`^--config ${file}:\\d+:\\d+: invalid YAML: `));
    expect(message).not.toContain('hunter2');
  });

  it('refuses a key given twice, naming its line', () => {
    const file = configFile('run.yaml', 'tp: 2\ngpuBlocks: 64\ntp: 4\n');
    expect(usageMessage(['--config', file])).toBe(`--config ${file}:3:1: invalid YAML: Map keys must be unique`);
  });

  it('refuses several documents, a list, and an unknown key with its line', () => {
    expect(usageMessage(['--config', configFile('run.yaml', 'tp: 2\n---\ntp: 4\n')])).toMatch(/:2:1: invalid YAML: the file holds several YAML documents; give one$/);
    expect(usageMessage(['--config', configFile('run.yaml', '- 1\n- 2\n')])).toMatch(/: expected a YAML object of settings$/);
    const file = configFile('run.yaml', 'tp: 2\ngpu_blocks: 8\n');
    expect(usageMessage(['--config', file])).toBe(`${file}:2: unknown key "gpu_blocks" (keys are the flags' camelCase names, e.g. "gpuBlocks")`);
  });
});
