import type { Registry } from 'prom-client';
import { label, registerSnapshotValues, unlabelled, type Sample } from '../metrics/snapshot-values.js';
import type { VerifyCounts } from './verifier.js';

/**
 * `kvtier_serve_*`, read at scrape time like the engine's metrics, in two
 * parts: the HTTP server's counters (responses by status, client
 * disconnects) where the HTTP server runs, and the queue and in-flight
 * gauges and the --verify counts where the engine runs. With the HTTP
 * server on a front-end thread, /metrics joins the two threads' texts.
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

export interface ServingMetricsSource {
  inFlight(): number;
  waiting(): number;
  verify(): VerifyCounts | null;
}

/** The HTTP server's counters: on the registry of the thread that runs the HTTP server. */
export function registerResponseMetrics(registry: Registry, counters: ServeCounters, prefix = 'kvtier_'): void {
  const name = (n: string) => `${prefix}serve_${n}`;
  registerSnapshotValues(registry, name('responses_total'), 'HTTP responses to completion requests, by status code.', 'counter', ['status'], () =>
    [...counters.responsesByStatus()].map(([status, n]): Sample => [label('status', String(status)), n]),
  );
  registerSnapshotValues(registry, name('client_disconnects_total'), 'Completions aborted because the client went away before they finished.', 'counter', [], () => [
    [unlabelled, counters.streamsAborted],
  ]);
}

/** The serving engine's gauges and the integrity counts: on the engine's registry, beside its own metrics. */
export function registerServingMetrics(registry: Registry, source: ServingMetricsSource, prefix = 'kvtier_'): void {
  const name = (n: string) => `${prefix}serve_${n}`;
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
