import { describe, expect, it } from 'vitest';
import { blockHashes } from '../../src/core/block-hash.js';
import { RequestError } from '../../src/core/errors.js';
import { createRequest, type RequestParams } from '../../src/scheduler/request.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { promptOf, requestFor, tinyConfig } from './helpers.js';

const limits = { vocabSize: 1000, maxModelLen: 64, blockSize: 4 };

function rejection(params: Partial<RequestParams>): RequestError {
  const full: RequestParams = { id: 'r1', promptTokens: [1, 2, 3], maxTokens: 4, ...params };
  try {
    createRequest(full, limits);
  } catch (err) {
    expect(err).toBeInstanceOf(RequestError);
    expect((err as RequestError).code).toBe('ERR_KVTIER_REQUEST');
    return err as RequestError;
  }
  throw new Error('request was accepted');
}

describe('request validation', () => {
  it('rejects an empty prompt', () => {
    expect(rejection({ promptTokens: [] }).message).toMatch(/promptTokens is empty/);
  });

  it('rejects a token outside the vocabulary, naming its index and value', () => {
    const message = rejection({ promptTokens: [5, 6, 1000, 7] }).message;
    expect(message).toContain('promptTokens[2] = 1000');
    expect(message).toContain('[0, 1000)');
    expect(rejection({ promptTokens: [5, -1] }).message).toContain('promptTokens[1] = -1');
    expect(rejection({ promptTokens: [5, 2.5] }).message).toContain('promptTokens[1] = 2.5');
  });

  it('rejects maxTokens below 1', () => {
    expect(rejection({ maxTokens: 0 }).message).toMatch(/maxTokens must be an integer >= 1, got 0/);
  });

  it('rejects a request that could not complete within maxModelLen', () => {
    const message = rejection({ promptTokens: promptOf(60, 1).map((t) => t % 1000), maxTokens: 5 }).message;
    expect(message).toContain('promptTokens.length 60 + maxTokens 5 = 65 exceeds maxModelLen 64');
  });

  it('rejects a non-integer or out-of-range seed', () => {
    expect(rejection({ seed: 1.5 }).message).toContain('seed must be an integer in [0, 4294967295], got 1.5');
    expect(rejection({ seed: -1 }).message).toContain('got -1');
    expect(rejection({ seed: 2 ** 32 }).message).toContain('got 4294967296');
  });

  it('rejects a stop token outside the vocabulary', () => {
    expect(rejection({ stopToken: 1000 }).message).toContain('stopToken 1000');
  });

  it('rejects precomputed prompt hashes of the wrong count', () => {
    expect(rejection({ promptTokens: [1, 2, 3, 4, 5], promptBlockHashes: [] }).message).toMatch(
      /promptBlockHashes must hold one hash per full prompt block \(1\), got 0/,
    );
  });

  it('rejects a duplicate id at the scheduler', () => {
    const scheduler = new Scheduler(tinyConfig());
    scheduler.addRequest(requestFor(scheduler, 'dup', { prompt: [1, 2, 3], maxTokens: 2 }));
    expect(() => scheduler.addRequest(requestFor(scheduler, 'dup', { prompt: [4, 5], maxTokens: 2 }))).toThrow(
      /request id 'dup' is already in use/,
    );
  });
});

describe('request block hashes', () => {
  it('hashes every full prompt block and extends the chain as output tokens complete blocks', () => {
    const prompt = [10, 11, 12, 13, 14, 15];
    const request = createRequest({ id: 'h', promptTokens: prompt, maxTokens: 6 }, limits);
    expect(request.blockHashes).toEqual(blockHashes(prompt, 4));
    request.appendOutputToken(16);
    expect(request.blockHashes).toHaveLength(1);
    request.appendOutputToken(17);
    expect(request.blockHashes).toEqual(blockHashes([...prompt, 16, 17], 4));
    expect(request.numTokens).toBe(8);
  });

  it('keys the hashes by the cache salt, so tenants never share blocks', () => {
    const a = createRequest({ id: 'a', promptTokens: [1, 2, 3, 4], maxTokens: 1, cacheSalt: 'tenant-a' }, limits);
    const b = createRequest({ id: 'b', promptTokens: [1, 2, 3, 4], maxTokens: 1, cacheSalt: 'tenant-b' }, limits);
    expect(a.blockHashes[0]).not.toBe(b.blockHashes[0]);
  });

  it('accepts precomputed prompt hashes as given', () => {
    const prompt = [1, 2, 3, 4, 5, 6, 7, 8];
    const hashes = blockHashes(prompt, 4);
    const request = createRequest({ id: 'p', promptTokens: prompt, maxTokens: 1, promptBlockHashes: hashes }, limits);
    expect(request.blockHashes).toEqual(hashes);
  });
});

describe('request tokens', () => {
  it("keeps a prompt of its own, whether given as an array or a view of a shared buffer, unchanged by later writes to the caller's tokens", () => {
    const shared = new Int32Array(new SharedArrayBuffer(64 * 4));
    shared.set(promptOf(3, 40).map((t) => t % 1000), 8);
    const plain = promptOf(5, 13).map((t) => t % 1000);
    for (const given of [plain, shared.subarray(8, 48)]) {
      const expected = Array.from(given);
      const request = createRequest({ id: 'r', promptTokens: given, maxTokens: 8 }, limits);
      given[0] = (given[0] + 1) % 1000;
      given[given.length - 1] = (given[given.length - 1] + 1) % 1000;
      expect(Array.from(request.promptTokens)).toEqual(expected);
      expect(request.tokensBetween(0, expected.length)).toEqual(expected);
      expect(request.blockHashes).toEqual(blockHashes(expected, limits.blockSize));
    }
  });

  // Decode tokens gather in a small tail before they reach the token buffer: whatever the block
  // size and the prompt's offset within a block, every reader sees prompt + output in order.
  for (const blockSize of [4, 16, 48]) {
    it(`reads back every appended token and hashes every full block, block size ${blockSize}`, () => {
      const prompt = promptOf(7, 3).map((t) => t % 1000);
      const request = createRequest({ id: 'r', promptTokens: prompt, maxTokens: 100 }, { vocabSize: 1000, maxModelLen: 128, blockSize });
      const output: number[] = [];
      for (let i = 0; i < 100; i++) {
        const token = (i * 37 + 11) % 1000;
        request.appendOutputToken(token);
        output.push(token);
        const all = [...prompt, ...output];
        expect(request.tokenAt(all.length - 1)).toBe(token);
        expect(request.numTokens).toBe(all.length);
        if (i % 9 === 0) {
          expect(request.tokensBetween(0, all.length)).toEqual(all);
          expect(request.tokensBetween(5, all.length - 2)).toEqual(all.slice(5, -2));
          // Copied into a buffer at an offset: the full blocks' tokens and the tail still being filled.
          const copied = new Int32Array(all.length + 3);
          request.copyTokens(2, all.length, copied, 3);
          expect(Array.from(copied.subarray(3, 3 + all.length - 2))).toEqual(all.slice(2));
          expect(request.blockHashes).toEqual(blockHashes(all, blockSize));
        }
      }
      expect(request.outputTokens).toEqual(output);
      expect(request.blockHashes).toEqual(blockHashes([...prompt, ...output], blockSize));
    });
  }
});
