import { describe, expect, it } from 'vitest';
import { TransferJobLedger } from '../../src/connector/transfer-job-ledger.js';

describe('transfer job ledger', () => {
  it('finds every job in flight by its id, once, whatever order they finish in', () => {
    const ledger = new TransferJobLedger();
    const issued = Array.from({ length: 300 }, (_, i) => ledger.issue(i % 3 === 0 ? 'load' : 'store', `r${i % 7}`, [`k${i}`], 1));
    expect(new Set(issued.map((j) => j.jobId)).size).toBe(300);
    expect(ledger.size).toBe(300);
    // Finish every other job, then the rest backwards: slots freed by the first half are reused below.
    for (let i = 0; i < 300; i += 2) expect(ledger.finish(issued[i].jobId)).toBe(issued[i]);
    const more = Array.from({ length: 100 }, (_, i) => ledger.issue('store', 'late', [`m${i}`], 1));
    for (let i = 299; i >= 1; i -= 2) expect(ledger.finish(issued[i].jobId)).toBe(issued[i]);
    for (const job of more) expect(ledger.finish(job.jobId)).toBe(job);
    expect(ledger.size).toBe(0);
    expect(ledger.finish(issued[0].jobId)).toBeUndefined();
    expect(ledger.hasStoresInFlight('late')).toBe(false);
  });

  it('tracks store jobs per request and keys being loaded until their jobs finish', () => {
    const ledger = new TransferJobLedger();
    const store = ledger.issue('store', 'a', ['x'], 1);
    const load = ledger.issue('load', 'b', ['y', 'z'], 2);
    expect(ledger.hasStoresInFlight('a')).toBe(true);
    expect(ledger.isBeingLoaded('z')).toBe(true);
    ledger.finish(store.jobId);
    ledger.finish(load.jobId);
    expect(ledger.hasStoresInFlight('a')).toBe(false);
    expect(ledger.isBeingLoaded('z')).toBe(false);
  });

  it('forgets jobs issued before a clear, and never reuses their ids', () => {
    const ledger = new TransferJobLedger();
    const before = ledger.issue('store', 'a', ['x'], 1);
    ledger.clear();
    expect(ledger.finish(before.jobId)).toBeUndefined();
    const after = ledger.issue('store', 'a', ['x'], 1);
    expect(after.jobId).toBeGreaterThan(before.jobId);
    expect(ledger.finish(after.jobId)).toBe(after);
  });
});
