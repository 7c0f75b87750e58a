import { describe, expect, it } from 'vitest';
import { parseFaultPlan, rulesForRank } from '../../src/faults/plan.js';
import { RankFaults } from '../../src/faults/rank-faults.js';

function rankFaults(plan: string, rank: number, seed = 3): RankFaults {
  return new RankFaults(rulesForRank(parseFaultPlan(plan, seed), rank), seed, rank);
}

describe('per-rank fault schedule', () => {
  it('activates load failures from their start step on, and only then changes the device', () => {
    const faults = rankFaults('load-fail:rank=1,p=0.25,after=5', 1);
    // The device starts without faults: nothing to apply before the start step.
    expect(faults.deviceFaultsAt(1)).toBeNull();
    expect(faults.deviceFaultsAt(4)).toBeNull();
    const active = faults.deviceFaultsAt(5);
    expect(active).toMatchObject({ loadFailProbability: 0.25, loadFailLimit: undefined });
    expect(faults.deviceFaultsAt(6)).toBeNull();
  });

  it('spends a load-fail count across the run', () => {
    const faults = rankFaults('load-fail:blocks=3|7,count=4', 0);
    expect(faults.deviceFaultsAt(0)).toMatchObject({ loadFailBlocks: [3, 7], loadFailLimit: 4 });
    faults.noteLoadFailures(3);
    // A later change of the active rules keeps the remaining budget.
    const withStore = rankFaults('load-fail:blocks=3|7,count=4;store-fail:p=0.5,after=9', 0);
    withStore.deviceFaultsAt(0);
    withStore.noteLoadFailures(3);
    expect(withStore.deviceFaultsAt(9)).toMatchObject({ loadFailLimit: 1, storeFailProbability: 0.5 });
  });

  it('combines rules and ignores other ranks', () => {
    const faults = rankFaults('load-fail:rank=0,p=0.5;load-fail:p=0.5;delay:rank=1,ms=9;delay:rank=0,ms=2', 0);
    expect(faults.deviceFaultsAt(0)).toMatchObject({ loadFailProbability: 0.75, delayMs: 2 });
  });

  it('stalls transfers from its start step, for the longest hold two rules ask', () => {
    const faults = rankFaults('stall:rank=0,after=5,steps=2;stall:rank=0,after=7,steps=3', 0);
    expect(faults.stalls).toBe(true);
    expect(faults.deviceFaultsAt(4)).toBeNull();
    expect(faults.deviceFaultsAt(5)).toMatchObject({ stall: { steps: 2 } });
    expect(faults.deviceFaultsAt(7)).toMatchObject({ stall: { steps: 3 } });
    expect(rankFaults('stall:rank=0;stall:rank=0,steps=4', 0).deviceFaultsAt(0)).toMatchObject({ stall: { steps: null } });
    expect(rankFaults('stall:rank=0,after=5', 1).stalls).toBe(false);
  });

  it('says when the rank crashes or hangs', () => {
    const faults = rankFaults('crash:rank=2,step=40,how=exit;hang:rank=2,step=50', 2);
    expect(faults.deathAt(39)).toBeNull();
    expect(faults.deathAt(40)).toEqual({ kind: 'crash', how: 'exit' });
    expect(faults.deathAt(50)).toEqual({ kind: 'hang' });
    expect(rankFaults('crash:rank=2,step=40', 1).deathAt(40)).toBeNull();
  });

  it('derives a different device seed per rank and per activation', () => {
    const a = rankFaults('load-fail:p=0.1', 0).deviceFaultsAt(0)!.seed;
    const b = rankFaults('load-fail:p=0.1', 1).deviceFaultsAt(0)!.seed;
    expect(a).not.toBe(b);
    expect(rankFaults('load-fail:p=0.1', 0).deviceFaultsAt(0)!.seed).toBe(a);
  });
});
