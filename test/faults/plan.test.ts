import { describe, expect, it } from 'vitest';
import { formatFaultPlan, parseFaultPlan, rulesForRank, validateFaultPlanRanks } from '../../src/faults/plan.js';

const EXAMPLE =
  'load-fail:rank=1,p=0.05;store-fail:rank=*,p=0.01;delay:rank=2,ms=3;crash:rank=1,step=40;hang:rank=0,step=25';

describe('fault plans', () => {
  it('parse every kind of the documented example', () => {
    const plan = parseFaultPlan(EXAMPLE, 7);
    expect(plan.seed).toBe(7);
    expect(plan.rules.map((r) => r.kind)).toEqual(['load-fail', 'store-fail', 'delay', 'crash', 'hang']);
    expect(plan.rules[0]).toMatchObject({ rank: 1, p: 0.05, after: 0, count: null, blocks: [] });
    expect(plan.rules[1]).toMatchObject({ rank: '*', p: 0.01 });
    expect(plan.rules[3]).toMatchObject({ rank: 1, step: 40, how: 'throw' });
  });

  it('load-fail takes listed blocks, a start step and a count', () => {
    const [rule] = parseFaultPlan('load-fail:rank=0,blocks=3|7,after=12,count=2').rules;
    expect(rule).toMatchObject({ kind: 'load-fail', rank: 0, blocks: [3, 7], after: 12, count: 2 });
  });

  it('an empty plan has no rules', () => {
    expect(parseFaultPlan('').rules).toEqual([]);
    expect(parseFaultPlan(' ; ').rules).toEqual([]);
  });

  it('accepts death rules for one rank at different moments, or for different ranks at one moment', () => {
    expect(parseFaultPlan('crash:rank=1,step=3;hang:rank=1,step=4;hang:rank=0,step=3;crash:rank=1,open=3').rules).toHaveLength(4);
  });

  it('round-trips through its string form', () => {
    const plan = parseFaultPlan(EXAMPLE + ';load-fail:blocks=1|2,count=3');
    expect(parseFaultPlan(formatFaultPlan(plan)).rules).toEqual(plan.rules);
  });

  it.each([
    ['explode:rank=1', /unknown fault kind 'explode'/],
    ['load-fail:rank=1,q=0.5', /load-fail: unknown key 'q'/],
    ['load-fail:rank=1', /needs p=\.\.\. or blocks=\.\.\./],
    ['store-fail:p=1.5', /store-fail: p: /],
    ['delay:ms=abc', /delay: ms=abc is not a number/],
    ['crash:rank=1', /crash: step: /],
    ['crash:step=3,how=melt', /crash: how: /],
    ['hang:rank=-1,step=2', /hang: rank: /],
    ['load-fail:p=0.1,p=0.2', /key 'p' given twice/],
    ['delay:ms', /'ms' is not key=value/],
    ['crash:rank=0x1,step=3', /crash: rank=0x1 is not a number/],
    ['load-fail:blocks=1|0b10', /load-fail: blocks=0b10 is not a number/],
    ['delay:ms=1e3', /delay: ms=1e3 is not a number/],
    ['crash:rank=1,step=3;hang:rank=1,step=3', /crash and hang both end rank=1 at step=3/],
    ['crash:step=2;crash:rank=0,step=2,how=exit', /crash and crash both end rank=0 at step=2/],
    ['hang:rank=1,open=2;crash:open=2', /hang and crash both end rank=1 at open=2/],
  ])('rejects %s with an error naming the problem', (text, message) => {
    expect(() => parseFaultPlan(text)).toThrow(message);
  });

  it('rejects a rank beyond tp and selects the rules of each rank', () => {
    const plan = parseFaultPlan(EXAMPLE);
    expect(() => validateFaultPlanRanks(plan, 2)).toThrow(/delay: rank=2 but tp is 2/);
    validateFaultPlanRanks(plan, 4);
    expect(rulesForRank(plan, 1).map((r) => r.kind)).toEqual(['load-fail', 'store-fail', 'crash']);
    expect(rulesForRank(plan, 3).map((r) => r.kind)).toEqual(['store-fail']);
  });
});
