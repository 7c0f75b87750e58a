import { describe, expect, it } from 'vitest';
import { chainStates } from '../../src/model/reference.js';
import type { SchedulerConnector } from '../../src/scheduler/connector-port.js';
import { Harness, outputWith, promptOf, TINY } from './helpers.js';

/** A connector that matches nothing and records the GPU blocks evicted, with their contents at that moment. */
function evictionRecorder(read: (blockId: number) => Uint32Array) {
  const evicted: Array<{ blockId: number; hash: string; contents: number[] }> = [];
  const connector: SchedulerConnector = {
    getNumNewMatchedTokens: () => ({ numTokens: 0, loadAsync: false }),
    updateStateAfterAlloc: () => null,
    buildConnectorMeta: (step) => ({ flushReqIds: step.preemptedReqIds, stores: [], loads: [] }),
    updateConnectorOutput: () => {},
    requestFinished: () => false,
    hasPendingWork: () => false,
    reset: () => {},
    onGpuBlockEvicted: (blockId, hash) => evicted.push({ blockId, hash, contents: Array.from(read(blockId)) }),
  };
  return { connector, evicted };
}

describe('scheduling steps', () => {
  it('prefills a long prompt in chunks across steps and samples only after the last chunk', async () => {
    const h = new Harness({ config: { maxNumBatchedTokens: 8 } });
    h.add('long', { prompt: promptOf(20, 1), maxTokens: 3 });
    const chunks = [await h.step(), await h.step(), await h.step()].map(({ scheduled }) => scheduled.requests[0]);
    expect(chunks.map((c) => [c.startPosition, c.tokens.length, c.sample])).toEqual([
      [0, 8, false],
      [8, 8, false],
      [16, 4, true],
    ]);
    await h.runUntilIdle();
    expect(h.outputs.get('long')).toEqual(h.expectedTokens('long'));
  });

  it('shares the token budget among requests in arrival order', async () => {
    const h = new Harness({ config: { maxNumBatchedTokens: 8 } });
    h.add('a', { prompt: promptOf(6, 1), maxTokens: 2, arrivalTime: 0 });
    h.add('b', { prompt: promptOf(6, 2), maxTokens: 2, arrivalTime: 1 });
    const first = (await h.step()).scheduled;
    expect(first.requests.map((r) => [r.reqId, r.tokens.length])).toEqual([
      ['a', 6],
      ['b', 2],
    ]);
    expect(first.totalScheduledTokens).toBe(8);
    const second = (await h.step()).scheduled;
    expect(second.requests.map((r) => [r.reqId, r.tokens.length])).toEqual([
      ['a', 1],
      ['b', 4],
    ]);
    await h.runUntilIdle();
    expect(h.outputs.get('a')).toEqual(h.expectedTokens('a'));
    expect(h.outputs.get('b')).toEqual(h.expectedTokens('b'));
  });

  it('never runs more than maxNumSeqs requests at once', async () => {
    const h = new Harness({ config: { maxNumSeqs: 2 } });
    for (const id of ['a', 'b', 'c']) h.add(id, { prompt: promptOf(5, id.charCodeAt(0)), maxTokens: 3 });
    let most = 0;
    while (h.scheduler.hasPendingWork()) {
      most = Math.max(most, (await h.step()).scheduled.requests.length);
      expect(h.scheduler.stats().running).toBeLessThanOrEqual(2);
    }
    expect(most).toBe(2);
    for (const id of ['a', 'b', 'c']) expect(h.outputs.get(id)).toEqual(h.expectedTokens(id));
  });

  it('without chunked prefill, holds back a prompt that does not fit the rest of the budget', async () => {
    const h = new Harness({ config: { enableChunkedPrefill: false, maxModelLen: 16, maxNumBatchedTokens: 16 } });
    h.add('a', { prompt: promptOf(10, 1), maxTokens: 3 });
    h.add('b', { prompt: promptOf(10, 2), maxTokens: 3 });
    expect((await h.step()).scheduled.requests.map((r) => r.reqId)).toEqual(['a']);
    expect((await h.step()).scheduled.requests.map((r) => [r.reqId, r.tokens.length])).toEqual([
      ['a', 1],
      ['b', 10],
    ]);
    await h.runUntilIdle();
    expect(h.outputs.get('b')).toEqual(h.expectedTokens('b'));
  });

  it('decodes one token per step: the last output token', async () => {
    const h = new Harness();
    h.add('a', { prompt: promptOf(5, 1), maxTokens: 4 });
    await h.step();
    const { scheduled } = await h.step();
    const decode = scheduled.requests[0];
    expect(decode.startPosition).toBe(5);
    expect(decode.tokens).toEqual([h.outputs.get('a')![0]]);
    expect(decode.sample).toBe(true);
  });

  it('sends the full block table to the workers once, then only the blocks appended', async () => {
    const h = new Harness();
    h.add('a', { prompt: promptOf(7, 1), maxTokens: 6 });
    const first = (await h.step()).scheduled.requests[0];
    expect(first.blockIds).toEqual([0, 1]);
    expect(first.newBlockIds).toEqual([]);
    const second = (await h.step()).scheduled.requests[0]; // position 7: still in block 1
    expect(second.blockIds).toBeNull();
    expect(second.newBlockIds).toEqual([]);
    const third = (await h.step()).scheduled.requests[0]; // position 8 starts block 2
    expect(third.blockIds).toBeNull();
    expect(third.newBlockIds).toEqual([2]);
  });

  it('numbers steps consecutively and lists finished requests in the next step', async () => {
    const h = new Harness();
    h.add('short', { prompt: promptOf(3, 1), maxTokens: 1 });
    h.add('long', { prompt: promptOf(3, 2), maxTokens: 3 });
    const first = await h.step();
    expect(first.updates.find((u) => u.reqId === 'short')?.finishReason).toBe('length');
    const second = (await h.step()).scheduled;
    expect(second.step).toBe(first.scheduled.step + 1);
    expect(second.finishedReqIds).toEqual(['short']);
    expect((await h.step()).scheduled.finishedReqIds).toEqual([]);
  });

  it('finishes a request at its stop token', async () => {
    const probe = new Harness();
    probe.add('p', { prompt: promptOf(6, 9), maxTokens: 5 });
    await probe.runUntilIdle();
    const stop = probe.outputs.get('p')![1];
    const h = new Harness();
    h.add('s', { prompt: promptOf(6, 9), maxTokens: 5, stopToken: stop });
    await h.runUntilIdle();
    expect(h.outputs.get('s')).toEqual(probe.outputs.get('p')!.slice(0, 2));
    expect(h.finishReasons.get('s')).toBe('stopped');
  });

  it('computes only the uncached tail of a prompt whose prefix is cached', async () => {
    const h = new Harness();
    const shared = promptOf(12, 5);
    h.add('first', { prompt: [...shared, 1, 2], maxTokens: 2 });
    await h.runUntilIdle();
    h.add('second', { prompt: [...shared, 3, 4, 5], maxTokens: 2 });
    const admitted = (await h.step()).scheduled.requests[0];
    expect(admitted.startPosition).toBe(12);
    expect(admitted.tokens).toEqual([3, 4, 5]);
    await h.runUntilIdle();
    expect(h.outputs.get('second')).toEqual(h.expectedTokens('second'));
    expect(h.scheduler.stats().gpuPrefixHitTokens).toBe(12);
  });

  it('still computes the last prompt token on a full prefix hit: the hit stops a block short', async () => {
    const h = new Harness();
    const prompt = promptOf(12, 6);
    h.add('first', { prompt, maxTokens: 2 });
    await h.runUntilIdle();
    h.add('again', { prompt, maxTokens: 3, seed: 99 });
    const admitted = (await h.step()).scheduled.requests[0];
    // Three cached blocks hold the whole prompt; the last one is recomputed for its last token's logits.
    expect([admitted.startPosition, admitted.tokens.length, admitted.sample]).toEqual([8, 4, true]);
    await h.runUntilIdle();
    expect(h.outputs.get('again')).toEqual(h.expectedTokens('again'));
  });

  it('reports no pending work and leaves every block free once all requests finished', async () => {
    const h = new Harness();
    for (let i = 0; i < 5; i++) h.add(`r${i}`, { prompt: promptOf(9, i), maxTokens: 4 });
    await h.runUntilIdle();
    expect(h.scheduler.hasUnfinishedRequests()).toBe(false);
    expect(h.scheduler.stats().kvCache.referenced).toBe(0);
    expect(h.scheduler.kvCacheManager.pool.checkConsistency()).toEqual([]);
    expect(h.scheduler.stats()).toMatchObject({ requestsFinished: 5, outputTokens: 20, decodeTokensComputed: 15 });
  });

  it('tells the connector which cached blocks it evicts, least recently used first, while their contents are intact', async () => {
    let recorder: ReturnType<typeof evictionRecorder> | null = null;
    const h = new Harness({
      config: { numGpuBlocks: 4, maxModelLen: 16 },
      connector: (ranks) => {
        recorder = evictionRecorder((id) => ranks.devices[0].gpuStates(id));
        return recorder.connector;
      },
    });
    const first = promptOf(8, 11);
    const a = h.add('a', { prompt: first, maxTokens: 1 });
    await h.runUntilIdle();
    h.add('b', { prompt: promptOf(15, 12), maxTokens: 1 }); // needs all four blocks
    await h.step();
    const states = Array.from(chainStates(TINY, first));
    expect(recorder!.evicted).toEqual([
      { blockId: 1, hash: a.blockHashes[1], contents: states.slice(4, 8) },
      { blockId: 0, hash: a.blockHashes[0], contents: states.slice(0, 4) },
    ]);
    await h.runUntilIdle();
    expect(h.outputs.get('b')).toEqual(h.expectedTokens('b'));
  });

  it('refuses an output that has no token for a request it sampled, naming the request', () => {
    const h = new Harness();
    h.add('s', { prompt: promptOf(6, 4), maxTokens: 3 });
    h.add('t', { prompt: promptOf(6, 5), maxTokens: 3 });
    const step = h.scheduler.schedule();
    expect(() => h.scheduler.updateFromOutput(step, outputWith(step, [['s', 11]]))).toThrow(/no sampled token for request 't'/);
  });
});
