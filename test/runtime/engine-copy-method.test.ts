import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/errors.js';
import { resolveEngineConfig } from '../../src/runtime/engine-config.js';

describe("the engine config's copy method", () => {
  it('defaults to auto and keeps an explicit kernel or dma', () => {
    expect(resolveEngineConfig({}).copyMethod).toBe('auto');
    expect(resolveEngineConfig({ copyMethod: 'kernel' }).copyMethod).toBe('kernel');
    expect(resolveEngineConfig({ copyMethod: 'dma' }).copyMethod).toBe('dma');
  });

  it('refuses an unknown method, naming the key', () => {
    expect(() => resolveEngineConfig({ copyMethod: 'fast' as never })).toThrow(ConfigError);
    expect(() => resolveEngineConfig({ copyMethod: 'fast' as never })).toThrow(/invalid engine config: copyMethod: /);
  });
});
