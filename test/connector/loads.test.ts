import { describe, expect, it } from 'vitest';
import { OffloadingConnectorError } from '../../src/connector/scheduler-connector.js';
import { bareRequest, blockRange, jobsFinished, offloadedKeysOf, promptOf, scriptedConnector } from './helpers.js';

/** Admission and loads, driven without a scheduler. */
describe('loads from the CPU tier', () => {
  it("touches every offloaded block of the request and looks up only past its GPU hit", () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(18, 1);
    const keys = offloadedKeysOf(prompt, 4, 1);
    connector.getNumNewMatchedTokens(bareRequest('r', prompt, 4), 8);
    expect(manager.touches).toEqual([keys]);
    expect(manager.lookups).toEqual([keys.slice(2)]);
  });

  it('does not look up when no full offloaded block lies past the GPU hit', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4, offloadFactor: 2 });
    const prompt = promptOf(15, 2);
    // One offloaded block of 8 tokens; the GPU hit covers it.
    expect(connector.getNumNewMatchedTokens(bareRequest('r', prompt, 4), 8)).toEqual({ numTokens: 0, loadAsync: false });
    expect(manager.lookups).toEqual([]);
    expect(manager.touches).toHaveLength(1);
  });

  it('loads a first-block hit into the first GPU blocks of the request', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(13, 3);
    const keys = offloadedKeysOf(prompt, 4, 1);
    const cpuIds = manager.hold(keys.slice(0, 2));
    const request = bareRequest('r', prompt, 4);
    expect(connector.getNumNewMatchedTokens(request, 0)).toEqual({ numTokens: 8, loadAsync: true });
    const table = [40, 41, 42, 43];
    const issued = connector.updateStateAfterAlloc(request, table, 8);
    expect(issued).toMatchObject({ firstBlockIndex: 0, gpuBlockIds: [40, 41], blockHashes: request.blockHashes.slice(0, 2) });
    const [load] = connector.buildConnectorMeta({ step: 0, scheduled: [], preemptedReqIds: [] }).loads;
    expect(load).toMatchObject({ jobId: issued?.jobId, reqId: 'r', direction: 'cpuToGpu', firstSubBlock: 0, fence: false });
    expect(load.gpuBlockIds).toEqual([40, 41]);
    expect(load.cpuBlockIds).toEqual(cpuIds);
    expect(manager.stats().pinnedBlocks).toBe(2);
    // Issued, not served: hits are counted once the request uses the loaded tokens.
    expect(connector.metrics()).toMatchObject({ cpuTierHitTokens: 0, loadsIssued: 1 });
    connector.externalTokensServed(request, 8, 0);
    expect(connector.metrics()).toMatchObject({ cpuTierHitTokens: 8, cpuTierRereadTokens: 0 });
  });

  it('loads a middle-block hit into the GPU blocks after the GPU prefix hit', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(20, 4);
    const keys = offloadedKeysOf(prompt, 4, 1);
    const cpuIds = manager.hold(keys.slice(2, 4));
    const request = bareRequest('r', prompt, 4);
    // GPU hit: blocks 0 and 1; the tier holds blocks 2 and 3.
    expect(connector.getNumNewMatchedTokens(request, 8)).toEqual({ numTokens: 8, loadAsync: true });
    const issued = connector.updateStateAfterAlloc(request, [7, 9, 11, 13, 15], 8);
    expect(issued).toMatchObject({ firstBlockIndex: 2, gpuBlockIds: [11, 13], blockHashes: request.blockHashes.slice(2, 4) });
    const [load] = connector.buildConnectorMeta({ step: 0, scheduled: [], preemptedReqIds: [] }).loads;
    expect(load.cpuBlockIds).toEqual(cpuIds);
  });

  it('starts a load inside a CPU block when the GPU hit ends inside one (f = 2)', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4, offloadFactor: 2 });
    const prompt = promptOf(21, 5);
    const keys = offloadedKeysOf(prompt, 4, 2);
    const cpuIds = manager.hold(keys);
    const request = bareRequest('r', prompt, 4);
    // The GPU hit is one GPU block: half of offloaded block 0. Both offloaded blocks are in the tier.
    expect(connector.getNumNewMatchedTokens(request, 4)).toEqual({ numTokens: 12, loadAsync: true });
    expect(manager.lookups).toEqual([keys]);
    const issued = connector.updateStateAfterAlloc(request, blockRange(30, 6), 12);
    expect(issued).toMatchObject({ firstBlockIndex: 1, gpuBlockIds: [31, 32, 33] });
    const [load] = connector.buildConnectorMeta({ step: 0, scheduled: [], preemptedReqIds: [] }).loads;
    expect(load.firstSubBlock).toBe(1);
    expect(load.cpuBlockIds).toEqual(cpuIds);
    expect(load.gpuBlockIds.length).toBe(load.cpuBlockIds.length * 2 - load.firstSubBlock);
  });

  it("passes the manager's 'not now' (null) on to the scheduler", () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    manager.lookup = () => null;
    expect(connector.getNumNewMatchedTokens(bareRequest('r', promptOf(8, 6), 4), 0)).toBeNull();
  });

  it('unpins a load when it finished and never stores the loaded blocks again', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(12, 7);
    manager.hold(offloadedKeysOf(prompt, 4, 1).slice(0, 2));
    const request = bareRequest('r', prompt, 4);
    connector.getNumNewMatchedTokens(request, 0);
    connector.updateStateAfterAlloc(request, blockRange(0, 3), 8);
    const { loads } = connector.buildConnectorMeta({ step: 0, scheduled: [], preemptedReqIds: [] });
    connector.updateConnectorOutput(jobsFinished(0, loads));
    expect(manager.stats().pinnedBlocks).toBe(0);
    expect(connector.hasPendingWork()).toBe(false);
    // The request computes its last block: only that one is offered.
    request.numComputedTokens = 12;
    const meta = connector.buildConnectorMeta({
      step: 1,
      scheduled: [{ request, blockIds: blockRange(0, 3), numScheduledTokens: 4, fresh: false }],
      preemptedReqIds: [],
    });
    expect(manager.storeOffers).toEqual([request.blockHashes.slice(2, 3)]);
    expect(meta.stores[0].gpuBlockIds).toEqual([2]);
  });

  it('keeps the CPU copy of a block whose load failed: the transfer failed, not the copy', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 8);
    const keys = offloadedKeysOf(prompt, 4, 1);
    manager.hold(keys);
    const request = bareRequest('r', prompt, 4);
    connector.getNumNewMatchedTokens(request, 0);
    connector.updateStateAfterAlloc(request, blockRange(0, 2), 8);
    const { loads } = connector.buildConnectorMeta({ step: 0, scheduled: [], preemptedReqIds: [] });
    connector.updateConnectorOutput(jobsFinished(0, loads, false));
    expect(manager.stats()).toMatchObject({ pinnedBlocks: 0, readyBlocks: 2 });
    expect(manager.lookup(keys)).toBe(2);
    expect(connector.metrics().loadsFailed).toBe(1);
  });

  it('does not load a block that another request\'s load is still bringing in', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(16, 9);
    manager.hold(offloadedKeysOf(prompt, 4, 1));
    const first = bareRequest('first', prompt, 4);
    connector.getNumNewMatchedTokens(first, 0);
    connector.updateStateAfterAlloc(first, blockRange(0, 4), 16);
    // Same prompt: its GPU hit stops at 3 blocks (the last token is always computed) while the
    // first request's load still brings the fourth in.
    const second = bareRequest('second', prompt, 4);
    expect(connector.getNumNewMatchedTokens(second, 12)).toEqual({ numTokens: 0, loadAsync: false });
    const { loads } = connector.buildConnectorMeta({ step: 0, scheduled: [], preemptedReqIds: [] });
    connector.updateConnectorOutput(jobsFinished(0, loads));
    // Once it landed the block may be loaded again (the GPU may have lost it since).
    expect(connector.getNumNewMatchedTokens(second, 12)).toEqual({ numTokens: 4, loadAsync: true });
  });

  it('ignores completions of jobs issued before a reset and starts from an empty tier', () => {
    const { connector, manager } = scriptedConnector({ blockSize: 4 });
    const prompt = promptOf(8, 10);
    manager.hold(offloadedKeysOf(prompt, 4, 1));
    const request = bareRequest('r', prompt, 4);
    connector.getNumNewMatchedTokens(request, 0);
    connector.updateStateAfterAlloc(request, blockRange(0, 2), 8);
    const { loads } = connector.buildConnectorMeta({ step: 0, scheduled: [], preemptedReqIds: [] });
    connector.reset();
    expect(connector.hasPendingWork()).toBe(false);
    expect(() => connector.updateConnectorOutput(jobsFinished(1, loads))).not.toThrow();
    expect(manager.stats().usedBlocks).toBe(0);
    // New jobs never reuse an old id.
    manager.hold(offloadedKeysOf(prompt, 4, 1));
    connector.getNumNewMatchedTokens(request, 0);
    expect(connector.updateStateAfterAlloc(request, blockRange(0, 2), 8)?.jobId).toBeGreaterThan(loads[0].jobId);
  });

  it('refuses a load the connector never offered', () => {
    const { connector } = scriptedConnector({ blockSize: 4 });
    const request = bareRequest('r', promptOf(8, 11), 4);
    expect(() => connector.updateStateAfterAlloc(request, blockRange(0, 2), 8)).toThrow(OffloadingConnectorError);
    expect(() => connector.getNumNewMatchedTokens(request, 3)).toThrow(/numComputedTokens 3/);
  });
});
