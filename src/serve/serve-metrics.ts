import type { Registry } from 'prom-client';
import { label, registerSnapshotValues, unlabelled, type Sample } from '../metrics/snapshot-values.js';
import type { VerifyCounts } from './verifier.js';

/**
 * The HTTP server's own counters, on the engine's registry (`kvtier_serve_*`):
 * responses by status, the queue and in-flight gauges, and with --verify
 * the integrity counts. Read at scrape time, like the engine's.
 */
export class ServeCounters {
  private readonly responses = new Map<number, number>();
  streamsAborted = 0;

  response(status: number): void {
    this.responses.set(status, (this.responses.get(status) ?? 0) + 1);
  }

  responsesByStatus(): ReadonlyMap<number, number> {
    return this.responses;
  }
}

export interface ServeMetricsSource {
  readonly counters: ServeCounters;
  inFlight(): number;
  waiting(): number;
  verify(): VerifyCounts | null;
}

export function registerServeMetrics(registry: Registry, source: ServeMetricsSource, prefix = 'kvtier_'): void {
  const name = (n: string) => `${prefix}serve_${n}`;
  registerSnapshotValues(registry, name('responses_total'), 'HTTP responses to completion requests, by status code.', 'counter', ['status'], () =>
    [...source.counters.responsesByStatus()].map(([status, n]): Sample => [label('status', String(status)), n]),
  );
  registerSnapshotValues(registry, name('client_disconnects_total'), 'Completions aborted because the client went away before they finished.', 'counter', [], () => [
    [unlabelled, source.counters.streamsAborted],
  ]);
  registerSnapshotValues(registry, name('requests_in_flight'), 'Completion requests accepted and not yet ended.', 'gauge', [], () => [[unlabelled, source.inFlight()]]);
  registerSnapshotValues(registry, name('requests_waiting'), 'Accepted requests without an output token yet (bounded by --max-waiting).', 'gauge', [], () => [
    [unlabelled, source.waiting()],
  ]);
  if (source.verify() === null) return;
  const verify = (pick: (v: VerifyCounts) => number) => (): readonly Sample[] => [[unlabelled, pick(source.verify() as VerifyCounts)]];
  registerSnapshotValues(registry, name('verified_total'), 'Finished requests checked against the reference model (--verify).', 'counter', [], verify((v) => v.checked));
  registerSnapshotValues(registry, name('verify_mismatches_total'), 'Checked requests whose output differs from the reference model.', 'counter', [], verify((v) => v.mismatches));
  registerSnapshotValues(registry, name('verify_skipped_total'), 'Requests not checked: aborted or failed before their output was complete.', 'counter', [], verify((v) => v.skipped));
  registerSnapshotValues(registry, name('verify_errors_total'), 'Checks that could not run.', 'counter', [], verify((v) => v.errors));
}
