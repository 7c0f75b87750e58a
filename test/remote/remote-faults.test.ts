import { describe, expect, it } from 'vitest';
import { formatFaultPlan, parseFaultPlan } from '../../src/faults/plan.js';
import { RemoteFaults } from '../../src/remote/remote-faults.js';

describe('remote faults in the fault-plan grammar', () => {
  it('parse remote-fail and remote-down, and round-trip', () => {
    const plan = parseFaultPlan('remote-fail:rank=1,p=0.25,after=4;remote-down:step=10,steps=5;remote-down:step=40');
    expect(plan.rules).toEqual([
      { kind: 'remote-fail', rank: 1, p: 0.25, after: 4 },
      { kind: 'remote-down', rank: '*', step: 10, steps: 5 },
      { kind: 'remote-down', rank: '*', step: 40, steps: null },
    ]);
    expect(parseFaultPlan(formatFaultPlan(plan)).rules).toEqual(plan.rules);
  });

  it.each([
    ['remote-fail:rank=0', /remote-fail: p: /],
    ['remote-down:steps=3', /remote-down: step: /],
    ['remote-down:step=1,for=3', /remote-down: unknown key 'for'/],
  ])('rejects %s naming the problem', (text, message) => {
    expect(() => parseFaultPlan(text)).toThrow(message);
  });

  it('take the remote down for the steps given, on every rank and the scheduler side', () => {
    const { rules } = parseFaultPlan('remote-down:step=10,steps=5;remote-down:step=40');
    const scheduler = new RemoteFaults(rules, 1, null);
    expect([9, 10, 14, 15, 39, 40, 1000].map((s) => scheduler.downAt(s))).toEqual([false, true, true, false, false, true, true]);
    expect(new RemoteFaults(rules, 1, 3).failureAt(12, 7)).toBe('connection');
  });

  it('fail about p of the jobs on the targeted rank only, the same jobs for the same seed', () => {
    const { rules } = parseFaultPlan('remote-fail:rank=1,p=0.3,after=2');
    const failedJobs = (rank: number, seed: number) =>
      Array.from({ length: 1000 }, (_, job) => new RemoteFaults(rules, seed, rank).failureAt(5, job)).filter((f) => f !== null).length;
    expect(failedJobs(0, 1)).toBe(0);
    expect(failedJobs(1, 1)).toBeGreaterThan(220);
    expect(failedJobs(1, 1)).toBeLessThan(380);
    expect(failedJobs(1, 1)).toBe(failedJobs(1, 1));
    expect(new RemoteFaults(rules, 1, 1).failureAt(1, 3)).toBeNull();
  });
});
