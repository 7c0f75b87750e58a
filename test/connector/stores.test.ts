import { describe, expect, it } from 'vitest';
import { OffloadingConnector, OffloadingConnectorError } from '../../src/connector/scheduler-connector.js';
import { lruManager } from '../../src/offload/lru-manager.js';
import { offloadGeometry, type StoreContext, type StorePolicy } from '../../src/offload/store-policies/store-policy.js';
import { bareRequest, blockRange, computeStep, jobsFinished, offloadedKeysOf, promptOf, scriptedConnector } from './helpers.js';

/** Store on compute, driven step by step without a scheduler (blocks of 4 tokens). */
describe('store on compute', () => {
  it('stores each full offloaded block once computed, reading its f GPU blocks', () => {
    const { connector } = scriptedConnector({ blockSize: 4, offloadFactor: 2 });
    const prompt = promptOf(17, 1);
    const request = bareRequest('r', prompt, 4);
    const table = blockRange(10, 5);
    const meta = connector.buildConnectorMeta(computeStep(0, request, table, 17));
    const keys = offloadedKeysOf(prompt, 4, 2);
    expect(meta.stores).toHaveLength(1);
    expect(meta.stores[0]).toMatchObject({ reqId: 'r', direction: 'gpuToCpu', fence: false, firstSubBlock: 0 });
    // Two offloaded blocks of 8 tokens: GPU blocks 10..13; the 17th token's block is not full.
    expect(meta.stores[0].gpuBlockIds).toEqual([10, 11, 12, 13]);
    expect(meta.stores[0].cpuBlockIds).toHaveLength(2);
    expect(keys).toHaveLength(2);
  });

  it('does not store a block one token short of full', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const request = bareRequest('r', promptOf(12, 2), 4);
    const table = blockRange(0, 3);
    expect(connector.buildConnectorMeta(computeStep(0, request, table, 7)).stores[0].gpuBlockIds).toEqual([0]);
    // Still one token short of the second block: nothing new is offered.
    expect(connector.buildConnectorMeta(computeStep(1, request, table, 0)).stores).toEqual([]);
    expect(manager.storeOffers).toHaveLength(1);
    expect(connector.buildConnectorMeta(computeStep(2, request, table, 1)).stores[0].gpuBlockIds).toEqual([1]);
  });

  it('stores only the blocks the manager accepted, and offers a declined block again next step', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(12, 3);
    const keys = offloadedKeysOf(prompt, 4, 1);
    const request = bareRequest('r', prompt, 4);
    const table = blockRange(20, 3);
    manager.declined = new Set([keys[1]]);
    const first = connector.buildConnectorMeta(computeStep(0, request, table, 12));
    expect(first.stores[0].gpuBlockIds).toEqual([20, 22]);
    expect(connector.metrics()).toMatchObject({ storeBlocksAccepted: 2, storeBlocksDeclined: 1 });

    // The mark stopped at the declined block: the next step offers it again (the others are held now).
    manager.declined = new Set();
    const second = connector.buildConnectorMeta(computeStep(1, request, table, 0));
    expect(manager.storeOffers[1]).toEqual(keys.slice(1));
    expect(second.stores[0].gpuBlockIds).toEqual([21]);
    // Everything is stored: nothing is offered again.
    connector.buildConnectorMeta(computeStep(2, request, table, 0));
    expect(manager.storeOffers).toHaveLength(2);
  });

  it('offers a store refused for lack of room (null) again next step', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 4);
    const request = bareRequest('r', prompt, 4);
    const table = blockRange(0, 2);
    manager.refusals = 1;
    expect(connector.buildConnectorMeta(computeStep(0, request, table, 8)).stores).toEqual([]);
    expect(connector.metrics().storesRejected).toBe(1);
    const retried = connector.buildConnectorMeta(computeStep(1, request, table, 0));
    expect(manager.storeOffers[1]).toEqual(offloadedKeysOf(prompt, 4, 1));
    expect(retried.stores[0].gpuBlockIds).toEqual([0, 1]);
  });

  it('offers a refused store again in the next decode step, though that step completes no block', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 5);
    const request = bareRequest('r', prompt, 4);
    const table = blockRange(0, 3);
    manager.refusals = 1;
    expect(connector.buildConnectorMeta(computeStep(0, request, table, 8)).stores).toEqual([]);
    // Decoding: one sampled token per step, the third block still short of full.
    request.appendOutputToken(7);
    const retried = connector.buildConnectorMeta(computeStep(1, request, table, 1));
    expect(retried.stores[0].gpuBlockIds).toEqual([0, 1]);
    request.appendOutputToken(7);
    expect(connector.buildConnectorMeta(computeStep(2, request, table, 1)).stores).toEqual([]);
    expect(manager.storeOffers).toHaveLength(2);
  });

  it('offers a declined block again in the next decode step, though that step completes no block', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 6);
    const keys = offloadedKeysOf(prompt, 4, 1);
    const request = bareRequest('r', prompt, 4);
    const table = blockRange(0, 3);
    manager.declined = new Set([keys[1]]);
    expect(connector.buildConnectorMeta(computeStep(0, request, table, 8)).stores[0].gpuBlockIds).toEqual([0]);
    manager.declined = new Set();
    request.appendOutputToken(7);
    expect(connector.buildConnectorMeta(computeStep(1, request, table, 1)).stores[0].gpuBlockIds).toEqual([1]);
  });

  it('moves past blocks the tier already holds without issuing a job', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 5);
    manager.hold(offloadedKeysOf(prompt, 4, 1));
    const request = bareRequest('r', prompt, 4);
    expect(connector.buildConnectorMeta(computeStep(0, request, blockRange(0, 2), 8)).stores).toEqual([]);
    connector.buildConnectorMeta(computeStep(1, request, blockRange(0, 2), 0));
    expect(manager.storeOffers).toHaveLength(1);
    expect(connector.hasPendingWork()).toBe(false);
  });

  it('issues at most one store job per request per step, covering every block it completed', () => {
    const { connector } = scriptedConnector({ blockSize: 4 });
    const a = bareRequest('a', promptOf(16, 6), 4);
    const b = bareRequest('b', promptOf(16, 7), 4);
    a.numComputedTokens = 16;
    b.numComputedTokens = 8;
    const meta = connector.buildConnectorMeta({
      step: 0,
      scheduled: [
        { request: a, blockIds: blockRange(0, 4), numScheduledTokens: 16, fresh: true },
        { request: b, blockIds: blockRange(4, 2), numScheduledTokens: 8, fresh: true },
      ],
      preemptedReqIds: [],
    });
    expect(meta.stores.map((s) => [s.reqId, s.gpuBlockIds])).toEqual([
      ['a', [0, 1, 2, 3]],
      ['b', [4, 5]],
    ]);
    expect(new Set(meta.stores.map((s) => s.jobId)).size).toBe(2);
  });

  it("resets a preempted request's mark, so it stores what it recomputes after resuming", () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 8);
    const request = bareRequest('r', prompt, 4);
    const stored = connector.buildConnectorMeta(computeStep(0, request, blockRange(0, 2), 8)).stores;
    connector.updateConnectorOutput(jobsFinished(0, stored));
    // The tier lost the blocks meanwhile (say, evicted); the request is preempted and recomputes.
    manager.reset();
    request.numComputedTokens = 0;
    const preempted = connector.buildConnectorMeta({ step: 1, scheduled: [], preemptedReqIds: ['r'] });
    expect(preempted.flushReqIds).toEqual(['r']);
    const resumed = connector.buildConnectorMeta(computeStep(2, request, blockRange(5, 2), 8));
    expect(resumed.stores[0].gpuBlockIds).toEqual([5, 6]);
  });

  it('completes a store in the manager when every rank finished it, and frees its blocks when it failed', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const a = bareRequest('a', promptOf(4, 9), 4);
    const b = bareRequest('b', promptOf(4, 10), 4);
    const storeA = connector.buildConnectorMeta(computeStep(0, a, [0], 4)).stores;
    const storeB = connector.buildConnectorMeta(computeStep(1, b, [1], 4)).stores;
    expect(manager.stats().beingStoredBlocks).toBe(2);
    connector.updateConnectorOutput(jobsFinished(1, storeA, true));
    connector.updateConnectorOutput(jobsFinished(1, storeB, false));
    expect(manager.lookup(offloadedKeysOf(promptOf(4, 9), 4, 1))).toBe(1);
    expect(manager.lookup(offloadedKeysOf(promptOf(4, 10), 4, 1))).toBe(0);
    expect(manager.stats()).toMatchObject({ usedBlocks: 1, beingStoredBlocks: 0 });
    expect(connector.metrics()).toMatchObject({ offloadedBlocksStored: 1, storesFailed: 1 });
  });

  it('keeps a finished request\'s blocks while its stores are in flight', () => {
    const { connector } = scriptedConnector({ blockSize: 4 });
    const request = bareRequest('r', promptOf(8, 11), 4);
    const stores = connector.buildConnectorMeta(computeStep(0, request, blockRange(0, 2), 8)).stores;
    expect(connector.requestFinished(request, blockRange(0, 2))).toBe(true);
    connector.updateConnectorOutput(jobsFinished(1, stores));
    expect(connector.hasPendingWork()).toBe(false);
    const idle = bareRequest('idle', promptOf(3, 12), 4);
    expect(connector.requestFinished(idle, [0])).toBe(false);
  });
});

/** The chain refresh that follows a store, driven step by step without a scheduler (blocks of 4 tokens). */
describe("a request's chain refreshed by its stores", () => {
  it('is refreshed from its first block to the last one offered, after every store that stored anything', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 20);
    const request = bareRequest('r', prompt, 4, 8);
    const table = blockRange(0, 4);
    connector.buildConnectorMeta(computeStep(0, request, table, 8));
    expect(manager.refreshes).toEqual([{ chain: offloadedKeysOf(prompt, 4, 1), firstOffered: 0 }]);
    // Four decode steps complete the third block, which only then is stored: the chain so far is refreshed.
    for (let step = 1; step <= 4; step++) {
      request.appendOutputToken(step);
      connector.buildConnectorMeta(computeStep(step, request, table, 1));
    }
    const tokens = [...prompt, 1, 2, 3, 4];
    expect(manager.refreshes).toHaveLength(2);
    expect(manager.refreshes[1]).toEqual({ chain: offloadedKeysOf(tokens, 4, 1).slice(0, 3), firstOffered: 2 });
  });

  it('is refreshed in offloaded blocks of f GPU blocks, keyed as the tier keys them', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4, offloadFactor: 2 });
    const prompt = promptOf(17, 21);
    connector.buildConnectorMeta(computeStep(0, bareRequest('r', prompt, 4), blockRange(0, 5), 17));
    expect(manager.refreshes).toEqual([{ chain: offloadedKeysOf(prompt, 4, 2), firstOffered: 0 }]);
  });

  it('is refused for a request the connector does not know, or blocks past its chain, naming them', () => {
    let offer: (context: StoreContext) => void = () => {};
    const policy: StorePolicy = {
      name: 'scripted',
      storesFor: (_step, context) => offer(context),
      onLoadIssued: () => {},
      onPreempted: () => {},
      onRequestFinished: () => {},
      onGpuBlockEvicted: () => {},
      attachGpuPrefixCache: () => {},
      reset: () => {},
    };
    const connector = new OffloadingConnector({
      manager: lruManager({ capacityBlocks: 8 }),
      policy,
      geometry: offloadGeometry(4, 1),
      bytesPerGpuBlock: 1,
    });
    const request = bareRequest('r', promptOf(8, 23), 4);
    const [first, second] = offloadedKeysOf(promptOf(8, 23), 4, 1);
    offer = (context) => context.store('nobody', [{ key: first, gpuBlockIds: [0] }], false, 0);
    expect(() => connector.buildConnectorMeta(computeStep(0, request, blockRange(0, 2), 8))).toThrowError(OffloadingConnectorError);
    offer = (context) => context.store('nobody', [{ key: 'k-other', gpuBlockIds: [2] }], false, 0);
    expect(() => connector.buildConnectorMeta(computeStep(1, request, blockRange(0, 2), 0))).toThrowError(
      /store for request 'nobody': the connector does not know the request/,
    );
    offer = (context) => context.store('r', [{ key: second, gpuBlockIds: [1] }], false, 2);
    expect(() => connector.buildConnectorMeta(computeStep(2, request, blockRange(0, 2), 0))).toThrowError(
      /store for request 'r': offloaded blocks \[2, 3\) are not within its 2 offloaded blocks/,
    );
  });

  it('is not refreshed by a store that stored nothing: refused for room, or every block already held', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 22);
    manager.refusals = 1;
    connector.buildConnectorMeta(computeStep(0, bareRequest('refused', prompt, 4), blockRange(0, 2), 8));
    manager.hold(offloadedKeysOf(prompt, 4, 1));
    connector.buildConnectorMeta(computeStep(1, bareRequest('held', prompt, 4), blockRange(2, 2), 8));
    expect(manager.storeOffers).toHaveLength(2);
    expect(manager.refreshes).toEqual([]);
  });
});
