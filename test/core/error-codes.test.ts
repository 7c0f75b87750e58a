import { describe, expect, it } from 'vitest';
import * as kvtier from '../../src/index.js';

/** Every error class the package entry exports, by name. */
function exportedErrorClasses(): [string, unknown][] {
  return Object.entries(kvtier).filter(([name, value]) => typeof value === 'function' && name.endsWith('Error'));
}

describe('error codes', () => {
  it('come from one table of distinct, stable ERR_KVTIER_ strings', () => {
    const codes = Object.values(kvtier.ERROR_CODES);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^ERR_KVTIER_[A-Z_]+$/);
    // Callers branch on these strings: they never change.
    expect(kvtier.ERROR_CODES).toMatchObject({
      config: 'ERR_KVTIER_CONFIG',
      rank: 'ERR_KVTIER_RANK',
      remoteConfig: 'ERR_KVTIER_REMOTE_CONFIG',
      remoteUnavailable: 'ERR_KVTIER_REMOTE_UNAVAILABLE',
    });
  });

  it('are carried by every error class the package exports, the remote tier\'s included', () => {
    const names = exportedErrorClasses().map(([name]) => name);
    expect(names).toEqual(expect.arrayContaining(['RemoteConfigError', 'RemoteUnavailableError', 'RemoteOperationError', 'RemoteValueError']));
    for (const [name, value] of exportedErrorClasses()) {
      if (name === 'KvtierError') continue;
      expect((value as { prototype: unknown }).prototype, name).toBeInstanceOf(kvtier.KvtierError);
    }
    const failed = new kvtier.RemoteOperationError('timeout', 'GET timed out');
    expect({ code: failed.code, kind: failed.kind, name: failed.name }).toEqual({
      code: kvtier.ERROR_CODES.remoteOperation,
      kind: 'timeout',
      name: 'RemoteOperationError',
    });
  });

  it('a malformed remote setting is an engine config error worded like every other, the URL masked', () => {
    const resolving = () => kvtier.resolveEngineConfig({ model: 'tiny', gpuBlocks: 16, cpuBlocks: 16, remote: 'redis://alice:secret@host:1/x' });
    expect(resolving).toThrow(kvtier.ConfigError);
    expect(resolving).toThrow("invalid engine config: remote: 'redis://alice:***@host:1/x': database 'x' must be a number 0..99");
  });
});
