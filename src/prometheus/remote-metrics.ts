import { label, unlabelled, type Sample } from '../metrics/snapshot-values.js';
import { rankConnected } from '../remote/remote-report.js';
import type { RemoteTierMetrics } from '../remote/remote-stats.js';

type Register = (name: string, help: string, labelNames: readonly string[], values: () => readonly Sample[]) => void;

/** The remote tier's Prometheus series (no samples without a remote tier); the remote's hit tokens are `hit_tokens_total{tier="remote"}`. */
export function registerRemoteMetrics(read: () => RemoteTierMetrics | undefined, counter: Register, gauge: Register): void {
  const whenRemote = (samples: (r: RemoteTierMetrics) => readonly Sample[]) => (): readonly Sample[] => {
    const r = read();
    return r === undefined ? [] : samples(r);
  };
  counter('remote_blocks_total', 'Offloaded blocks the remote tier was asked to read or write (one shard per rank each).', ['op'], whenRemote((r) => [
    [label('op', 'read'), r.reads.blocks],
    [label('op', 'write'), r.writes.blocks],
  ]));
  counter('remote_failed_blocks_total', 'Remote block reads and writes that failed on some rank, by cause (miss, timeout, connection, value, dropped, server).', ['op', 'cause'], whenRemote((r) => {
    const samples: Sample[] = [];
    for (const [op, counts] of [['read', r.reads], ['write', r.writes]] as const) {
      for (const [cause, n] of Object.entries(counts.failures)) samples.push([{ op, cause }, n]);
    }
    return samples;
  }));
  counter('remote_bytes_total', 'Payload bytes moved to or from the remote tier, summed over ranks.', ['op'], whenRemote((r) => [
    [label('op', 'read'), r.reads.bytes],
    [label('op', 'write'), r.writes.bytes],
  ]));
  counter('remote_write_retried_blocks_total', 'Blocks whose remote write some rank sent again after a transient failure (each block once).', [], whenRemote((r) => [[unlabelled, r.writes.retried]]));
  counter('remote_write_given_up_blocks_total', 'Blocks whose remote write still failed after its last try, or whose retry shutdown cut short.', [], whenRemote((r) => [[unlabelled, r.writes.givenUp]]));
  counter('remote_manifests_total', 'Block manifests written after every rank wrote its shard, by outcome.', ['outcome'], whenRemote((r) => [
    [label('outcome', 'ok'), r.manifests.written],
    [label('outcome', 'failed'), r.manifests.failed],
  ]));
  counter('remote_lookups_total', 'Asynchronous remote lookups at admission, by outcome (a failed or timed-out lookup is a miss).', ['outcome'], whenRemote((r) => [
    [label('outcome', 'answered'), r.lookups.count - r.lookups.failed],
    [label('outcome', 'failed'), r.lookups.failed - r.lookups.timedOut],
    [label('outcome', 'timed_out'), r.lookups.timedOut],
  ]));
  gauge('remote_lookup_latency_seconds', 'Remote lookup latency quantiles over the run.', ['quantile'], whenRemote((r) => {
    const samples: Sample[] = [];
    if (r.lookups.latencyMs.p50 !== null) samples.push([label('quantile', '0.5'), r.lookups.latencyMs.p50 / 1000]);
    if (r.lookups.latencyMs.p99 !== null) samples.push([label('quantile', '0.99'), r.lookups.latencyMs.p99 / 1000]);
    return samples;
  }));
  counter('remote_reconnects_total', 'Times the scheduler side lost its remote connection and scheduled a reconnect.', [], whenRemote((r) => [[unlabelled, r.reconnects]]));
  gauge(
    'remote_connected',
    '1 while the side is connected to the remote tier: rank="scheduler" (lookups, manifests) or a rank number (its shards; 0 too when every write of the rank failed).',
    ['rank'],
    whenRemote((r) => [
      [label('rank', 'scheduler'), r.connected ? 1 : 0],
      ...r.ranks.map((h): Sample => [label('rank', String(h.rank)), rankConnected(h) ? 1 : 0]),
    ]),
  );
}
