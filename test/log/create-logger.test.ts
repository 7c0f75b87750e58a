import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log/create-logger.js';

function capture(format: 'json' | 'pretty', level = 'warn') {
  const lines: string[] = [];
  const logger = createLogger({ level, format, write: (line) => lines.push(line) });
  return { logger, lines };
}

describe('the CLI logger', () => {
  it('writes one JSON object per line with level, time, message and the fields', () => {
    const { logger, lines } = capture('json');
    logger.warn({ event: 'rank_lost', rank: 1 }, 'rank 1 lost');
    expect(lines).toHaveLength(1);
    expect(lines[0].endsWith('\n')).toBe(true);
    expect(JSON.parse(lines[0])).toMatchObject({ level: 40, msg: 'rank 1 lost', event: 'rank_lost', rank: 1, name: 'kvtier' });
  });

  it('writes one readable line per record in the pretty format', () => {
    const { logger, lines } = capture('pretty');
    logger.error({ event: 'engine_stopped', cause: 'worker thread exited' }, 'engine stopped');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} ERROR engine stopped event=engine_stopped cause="worker thread exited"\n$/);
  });

  it('drops records below its level (warn by default in the CLI)', () => {
    const { logger, lines } = capture('json', 'warn');
    logger.info({ event: 'fault_rule_armed' }, 'armed');
    logger.debug({}, 'detail');
    expect(lines).toEqual([]);
  });
});
