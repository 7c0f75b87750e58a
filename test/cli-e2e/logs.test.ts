import { describe, expect, it } from 'vitest';
import { kvtier } from './cli.js';

/** `kvtier run --log-format json`: structured lines on stderr for what went wrong, none per request. */

function jsonLines(stderr: string): Record<string, unknown>[] {
  return stderr
    .split(/[\r\n]+/)
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const SHORT_RUN = ['run', '--backend', 'host', '--requests', '6', '--rounds', '1', '--gpu-blocks', '256', '--cpu-blocks', '1024'];

describe('kvtier run logs', () => {
  it('at the default level (warn), log a rank death, its restart and slow steps as JSON lines on stderr', async () => {
    const result = await kvtier([
      ...SHORT_RUN,
      '--faults', 'crash:rank=1,step=20', '--rank-restart', '--log-format', 'json', '--slow-step-ms', '0.001',
    ]);
    expect(result.code).toBe(0);
    const records = jsonLines(result.stderr);
    expect(records.find((r) => r.event === 'rank_lost')).toMatchObject({ level: 40, rank: 1, step: 20 });
    expect(records.find((r) => r.event === 'rank_restarted')).toMatchObject({ level: 40, rank: 1 });
    expect(records.filter((r) => r.event === 'slow_step').length).toBeGreaterThan(10);
    // Info records (the armed fault rule) stay below the default level; nothing else is logged.
    expect(new Set(records.map((r) => r.event))).toEqual(new Set(['rank_lost', 'rank_restarted', 'slow_step']));
    expect(result.stdout).not.toMatch(/^\{/m);
  });

  it('--log-level info adds the armed fault rules; --log-level silent logs nothing', async () => {
    const info = await kvtier([...SHORT_RUN, '--faults', 'delay:rank=0,ms=0', '--log-format', 'json', '--log-level', 'info']);
    expect(info.code).toBe(0);
    expect(jsonLines(info.stderr).map((r) => r.event)).toEqual(['fault_rule_armed']);
    const silent = await kvtier([...SHORT_RUN, '--faults', 'crash:rank=1,step=20', '--rank-restart', '--log-level', 'silent', '--log-format', 'json']);
    expect(silent.code).toBe(0);
    expect(jsonLines(silent.stderr)).toEqual([]);
  });
});
