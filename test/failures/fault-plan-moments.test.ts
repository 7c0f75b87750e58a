import { describe, expect, it } from 'vitest';
import { FaultPlanError, formatFaultPlan, parseFaultPlan, rulesForRank } from '../../src/faults/plan.js';
import { RankFaults } from '../../src/faults/rank-faults.js';
import { Engine } from '../../src/runtime/engine.js';

/**
 * The parts of the fault plan that rank-death and recovery tests lean on:
 * when a rank dies (a step, the N-th device open, the N-th reset), and plans
 * that could only fail a rank mid-run being refused before anything starts.
 */

function rankFaults(plan: string, rank: number, loadFailuresBefore = 0): RankFaults {
  const parsed = parseFaultPlan(plan, 1);
  return new RankFaults(rulesForRank(parsed, rank), parsed.seed, rank, loadFailuresBefore);
}

describe('death moments in fault plans', () => {
  it('a rank dies at a step, after its N-th device open, or during the N-th reset', () => {
    const faults = rankFaults('crash:rank=1,open=2,how=exit;hang:rank=1,reset=1;crash:rank=1,step=7', 1);
    expect(faults.deathAtOpen(1)).toBeNull();
    expect(faults.deathAtOpen(2)).toEqual({ kind: 'crash', how: 'exit' });
    expect(faults.deathAtReset(1)).toEqual({ kind: 'hang' });
    expect(faults.deathAtReset(2)).toBeNull();
    expect(faults.deathAt(7)).toEqual({ kind: 'crash', how: 'throw' });
    // A moment of one kind never matches another kind's number.
    expect(faults.deathAt(2)).toBeNull();
  });

  it('round-trips through its string form', () => {
    const plan = parseFaultPlan('crash:rank=1,open=2,how=exit;hang:reset=3;crash:step=4');
    expect(parseFaultPlan(formatFaultPlan(plan)).rules).toEqual(plan.rules);
  });

  it.each([
    ['crash:rank=1,step=3,open=2', /crash: step: give exactly one of step=S, open=N or reset=N/],
    ['hang:rank=0', /hang: step: give exactly one of step=S, open=N or reset=N/],
    ['crash:open=0', /crash: open: /],
    ['hang:reset=x', /hang: reset=x is not a number/],
  ])('rejects %s naming the problem', (text, message) => {
    expect(() => parseFaultPlan(text)).toThrow(message);
  });

  it('a restarted rank starts with the load failures its earlier incarnations spent', () => {
    expect(rankFaults('load-fail:p=1,count=5', 0, 3).deviceFaultsAt(0)).toMatchObject({ loadFailLimit: 2 });
    expect(rankFaults('load-fail:p=1,count=5', 0, 9).deviceFaultsAt(0)).toMatchObject({ loadFailLimit: 0 });
  });
});

describe('fault plans checked against the engine', () => {
  it('a plan listing a GPU block outside the pool is refused before any rank starts', async () => {
    const creating = Engine.create({ backend: 'host', model: 'tiny', tp: 2, gpuBlocks: 16, faults: 'load-fail:rank=0,blocks=3|19,after=50' });
    await expect(creating).rejects.toBeInstanceOf(FaultPlanError);
    await expect(creating).rejects.toThrow(/load-fail: blocks=19 is not a GPU block \(gpuBlocks is 16, ids 0\.\.15\)/);
  });

  it('a plan naming a rank beyond tp is refused', async () => {
    await expect(Engine.create({ backend: 'host', model: 'tiny', tp: 2, gpuBlocks: 16, faults: 'crash:rank=2,open=1' })).rejects.toThrow(
      /crash: rank=2 but tp is 2/,
    );
  });
});
