import { describe, expect, it } from 'vitest';
import { ConfigError, EngineError, RequestError } from '../../src/core/errors.js';
import { Engine, EngineStoppedError } from '../../src/runtime/engine.js';
import type { RequestSpec } from '../../src/runtime/engine-types.js';
import { expectAllMatchReference, tokens, withEngine } from './helpers.js';

/**
 * How the library API treats a caller's mistakes: every request is checked
 * as given, by one set of rules whichever call adds it, and nothing is ever
 * silently converted into something else and served.
 */

const SMALL = { tp: 1, gpuBlocks: 32, offload: false, computeNsPerToken: 0 } as const;

/** Prompts that a typed array would quietly turn into other tokens. */
const COERCIBLE_PROMPTS: [string, unknown][] = [
  ['fractions', [1.5, 2.7]],
  ['a string', 'hello'],
  ['NaN, null and an object', [NaN, null, {}]],
  ['a token past 2^32 (wraps to 5)', [2 ** 32 + 5]],
  ['a numeric string token', ['7']],
];

function withPrompt(promptTokens: unknown): RequestSpec {
  return { promptTokens: promptTokens as RequestSpec['promptTokens'], maxTokens: 2 };
}

describe('requests are validated before they are converted', () => {
  it.each(COERCIBLE_PROMPTS)('a prompt of %s is refused by addRequest and addRequests alike, and nothing is queued', async (_, prompt) => {
    await withEngine(SMALL, async (engine) => {
      expect(() => engine.addRequest(withPrompt(prompt))).toThrow(RequestError);
      await expect(engine.addRequests([withPrompt([1, 2, 3]), withPrompt(prompt)])).rejects.toThrow(/^requests\[1\]: .*promptTokens/);
      expect(engine.hasPendingWork()).toBe(false);
      expect(engine.metrics().requests.added).toBe(0);
    });
  });

  it('addRequests names a batch that is not an array, or an entry that is not a request, with a RequestError', async () => {
    await withEngine(SMALL, async (engine) => {
      await expect(engine.addRequests(null as unknown as RequestSpec[])).rejects.toThrow(RequestError);
      await expect(engine.addRequests([null as unknown as RequestSpec])).rejects.toThrow(/^requests\[0\]: expected a request object/);
    });
  });
});

describe('configs past what the engine can hold', () => {
  it.each([
    ['a CPU tier of 1e11 blocks', { cpuBlocks: 1e11 }, /cpuBlocks/],
    ['a CPU tier in bytes that makes too many blocks', { cpuBytes: 2 ** 50 }, /cpuBytes: .* over the limit of 16777215/],
    ['a GPU pool of 2^26 blocks', { gpuBlocks: 67108864 }, /gpuBlocks/],
    ['a compute time of 1e15 ns per token', { computeNsPerToken: 1e15 }, /computeNsPerToken/],
    ['a start deadline past the timer limit', { startDeadlineMs: 2 ** 31 }, /startDeadlineMs/],
  ])('%s is refused by Engine.create with a ConfigError naming the field', async (_, config, field) => {
    const creating = Engine.create({ backend: 'host', model: 'tiny', ...config });
    await expect(creating).rejects.toThrow(ConfigError);
    await expect(creating).rejects.toThrow(field);
  });
});

describe('request ids', () => {
  it('a generated id never takes an id the caller chose, in one batch or across calls', async () => {
    await withEngine(SMALL, async (engine) => {
      engine.addRequest({ id: 'req-0', promptTokens: tokens(1, 5), maxTokens: 2 });
      const generated = engine.addRequest({ promptTokens: tokens(2, 5), maxTokens: 2 });
      const batch = await engine.addRequests([
        { promptTokens: tokens(3, 5), maxTokens: 2 },
        { id: 'req-2', promptTokens: tokens(4, 5), maxTokens: 2 },
        { id: 'req-3', promptTokens: tokens(5, 5), maxTokens: 2 },
      ]);
      const ids = ['req-0', generated, ...batch];
      expect(new Set(ids).size).toBe(5);
      expect(batch.slice(1)).toEqual(['req-2', 'req-3']);
      expectAllMatchReference(await engine.run(), 5);
    });
  });
});

describe('request ids under concurrency', () => {
  it('a caller id taken while a batch is being hashed moves the batch\'s generated id, not the caller\'s', async () => {
    await withEngine(SMALL, async (engine) => {
      const adding = engine.addRequests([{ promptTokens: tokens(6, 5), maxTokens: 2 }]);
      engine.addRequest({ id: 'req-0', promptTokens: tokens(7, 5), maxTokens: 2 });
      const [generated] = await adding;
      expect(generated).not.toBe('req-0');
      expectAllMatchReference(await engine.run(), 2);
    });
  });
});

describe('shutdown', () => {
  it('a batch still being added when the engine shuts down is rejected with EngineStoppedError', async () => {
    const engine = await Engine.create({ backend: 'host', model: 'tiny', ...SMALL });
    const adding = engine.addRequests([{ promptTokens: tokens(1, 40), maxTokens: 2 }]);
    const refused = expect(adding).rejects.toThrow(EngineStoppedError);
    await engine.shutdown();
    await refused;
    expect(engine.liveRankThreads()).toBe(0);
  });

  it('run() after shutdown() throws, as step() does', async () => {
    const engine = await Engine.create({ backend: 'host', model: 'tiny', ...SMALL });
    await engine.shutdown();
    await expect(engine.step()).rejects.toThrow(EngineError);
    await expect(engine.run()).rejects.toThrow(/engine is shut down/);
  });
});
