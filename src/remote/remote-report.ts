import type { RemoteRankHealth } from '../protocol/remote-jobs.js';
import type { RemoteTierMetrics, RemoteTransferCounts } from './remote-stats.js';

/** The remote tier's lines of the run report (label, text). */
export function remoteReportRows(remote: RemoteTierMetrics, promptTokens: number): [string, string][] {
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const ms = (x: number | null) => (x === null ? '-' : `${x.toFixed(x < 10 ? 2 : 1)} ms`);
  const share = promptTokens === 0 ? '-' : `${((100 * remote.hitTokens) / promptTokens).toFixed(1)}%`;
  const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
  const failures = (c: RemoteTransferCounts) => {
    const kinds = Object.entries(c.failures).map(([kind, blocks]) => `${kind} ${n(blocks)}`);
    return kinds.length === 0 ? '' : ` (${kinds.join(', ')})`;
  };
  const retries = (r: RemoteTierMetrics) =>
    r.writes.retried === 0 && r.writes.givenUp === 0 ? '' : `   ${n(r.writes.retried)} retried, ${n(r.writes.givenUp)} given up`;
  const l = remote.lookups;
  return [
    ['remote hits', `${n(remote.hitTokens)} tok (${share} of prompt), read into the CPU tier and loaded from there`],
    ['remote reads', `${n(remote.reads.blocks)} blocks   ${n(remote.reads.failed)} failed${failures(remote.reads)}   ${mb(remote.reads.bytes)}`],
    ['remote writes', `${n(remote.writes.blocks)} blocks   ${n(remote.writes.failed)} failed${failures(remote.writes)}${retries(remote)}   ${mb(remote.writes.bytes)}   manifests ${n(remote.manifests.written)}${remote.manifests.failed > 0 ? ` (${n(remote.manifests.failed)} failed)` : ''}`],
    ['remote lookups', `${n(l.count)}   ${n(l.blocksFound)}/${n(l.blocksAsked)} blocks found   ${n(l.failed)} failed (${n(l.timedOut)} timed out)   p50 ${ms(l.latencyMs.p50)}   p99 ${ms(l.latencyMs.p99)}`],
    ['remote server', `${remote.connected ? 'connected' : 'DISCONNECTED'}   ${n(remote.reconnects)} reconnects`],
    ...remoteRankWarnings(remote).map((text): [string, string] => ['remote warning', text]),
  ];
}

/** One line per rank that cannot reach the server, or whose writes all failed: its shards never move, so no block is shared. */
export function remoteRankWarnings(remote: RemoteTierMetrics): string[] {
  const why = (h: RemoteRankHealth) => (h.lastError === null ? '' : `: ${h.lastError}`);
  const lines: string[] = [];
  for (const h of remote.ranks) {
    if (!h.connected) lines.push(`rank ${h.rank} is not connected to the server${why(h)}`);
    else if (h.writeFailed && !h.wroteAny) lines.push(`rank ${h.rank}: every write failed${why(h)}`);
  }
  return lines;
}

/** A rank counts as connected when its connection is up and its writes do not all fail. */
export function rankConnected(h: RemoteRankHealth): boolean {
  return h.connected && !(h.writeFailed && !h.wroteAny);
}
