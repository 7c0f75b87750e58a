import type { RemoteJobFailure, RemoteRankHealth } from '../protocol/remote-jobs.js';
import type { RemoteConnectionStats } from './remote-store.js';

/** The remote tier's counters, as reports, JSON and Prometheus show them. */
export interface RemoteTierMetrics {
  /** Tokens read from the remote into the CPU tier beyond the GPU prefix hit (then loaded as CPU-tier hits). */
  readonly hitTokens: number;
  /**
   * Hit tokens of admitted requests that lay in CPU-tier blocks read from the
   * remote, by the request itself or by an earlier one: counted per request,
   * as CPU-tier hits are, so a block fetched once and hit by three requests
   * counts three times.
   */
  readonly servedTokens: number;
  readonly lookups: {
    readonly count: number;
    readonly failed: number;
    readonly timedOut: number;
    /** Blocks asked about, and those found present (every rank's shard written). */
    readonly blocksAsked: number;
    readonly blocksFound: number;
    readonly latencyMs: { readonly p50: number | null; readonly p99: number | null };
  };
  readonly reads: RemoteTransferCounts;
  /**
   * `failed` includes `dropped`: writes refused because too many were in flight.
   * `retried`: blocks whose shards some rank sent again after a transient failure
   * (each block once); `givenUp`: blocks still failing transiently after their
   * last try, or whose retry shutdown cut short (part of `failed`). Blocks that
   * landed on a retry are `retried` and `succeeded`.
   */
  readonly writes: RemoteTransferCounts & { readonly dropped: number; readonly retried: number; readonly givenUp: number };
  /** `retried`: manifests written again after a failure (each time); `failed`: those still failing after their last try. */
  readonly manifests: { readonly written: number; readonly failed: number; readonly retried: number };
  readonly reconnects: number;
  /** The scheduler side's connection (lookups and manifests). */
  readonly connected: boolean;
  /** Each rank's standing (its own connection moves its shards), by rank; a rank that never reported is absent. */
  readonly ranks: readonly RemoteRankHealth[];
}

export interface RemoteTransferCounts {
  /** Blocks issued (a block moves one shard per rank). */
  readonly blocks: number;
  readonly succeeded: number;
  /** Blocks whose job failed on some rank, by the first failure reported. */
  readonly failed: number;
  readonly failures: Readonly<Record<string, number>>;
  /** Payload bytes moved, over all ranks. */
  readonly bytes: number;
}

const MAX_LATENCY_SAMPLES = 100_000;

export class RemoteTierStats {
  private hitTokens = 0;
  private servedTokens = 0;
  private lookups = 0;
  private lookupsFailed = 0;
  private lookupsTimedOut = 0;
  private blocksAsked = 0;
  private blocksFound = 0;
  private readonly latencies: number[] = [];
  private readonly reads = newCounts();
  private readonly writes = { ...newCounts(), dropped: 0, retried: 0, givenUp: 0 };
  private manifestWrites = 0;
  private manifestFailures = 0;
  private manifestRetries = 0;
  private connection: RemoteConnectionStats = { reconnects: 0, connected: false };
  private readonly ranks = new Map<number, RemoteRankHealth>();

  lookupAnswered(ms: number, asked: number, found: number): void {
    this.lookups++;
    this.blocksAsked += asked;
    this.blocksFound += found;
    this.sample(ms);
  }

  lookupFailed(ms: number, timedOut: boolean): void {
    this.lookups++;
    this.lookupsFailed++;
    if (timedOut) this.lookupsTimedOut++;
    this.sample(ms);
  }

  /** An admitted request hit `tokens` in blocks the remote filled. */
  served(tokens: number): void {
    this.servedTokens += tokens;
  }

  fetchIssued(blocks: number): void {
    this.reads.blocks += blocks;
  }

  fetchSucceeded(blocks: number, tokens: number, bytes: number): void {
    this.reads.succeeded += blocks;
    this.reads.bytes += bytes;
    this.hitTokens += tokens;
  }

  fetchFailed(blocks: number, failure: RemoteJobFailure | null): void {
    this.reads.failed += blocks;
    const kind = failure ?? 'server';
    this.reads.failures[kind] = (this.reads.failures[kind] ?? 0) + blocks;
  }

  writeIssued(blocks: number): void {
    this.writes.blocks += blocks;
  }

  writeSucceeded(blocks: number, bytes: number): void {
    this.writes.succeeded += blocks;
    this.writes.bytes += bytes;
  }

  writeFailed(blocks: number, failure: RemoteJobFailure | null): void {
    this.writes.failed += blocks;
    const kind = failure ?? 'server';
    this.writes.failures[kind] = (this.writes.failures[kind] ?? 0) + blocks;
    if (kind === 'dropped') this.writes.dropped += blocks;
  }

  /** Blocks whose write was tried again on some rank. */
  writesRetried(blocks: number): void {
    this.writes.retried += blocks;
  }

  /** Blocks whose write still failed transiently after its last try (already counted as failed). */
  writesGivenUp(blocks: number): void {
    this.writes.givenUp += blocks;
  }

  /** Writes the scheduler side dropped before issuing them (too many in flight). */
  writesDropped(blocks: number): void {
    this.writes.dropped += blocks;
    this.writes.failed += blocks;
    this.writes.failures.dropped = (this.writes.failures.dropped ?? 0) + blocks;
  }

  manifestsWritten(n: number): void {
    this.manifestWrites += n;
  }

  manifestsFailed(n: number): void {
    this.manifestFailures += n;
  }

  manifestsRetried(n: number): void {
    this.manifestRetries += n;
  }

  noteRankHealth(health: RemoteRankHealth): void {
    this.ranks.set(health.rank, health);
  }

  noteConnection(stats: RemoteConnectionStats): void {
    this.connection = stats;
  }

  snapshot(): RemoteTierMetrics {
    const sorted = Float64Array.from(this.latencies).sort();
    return {
      hitTokens: this.hitTokens,
      servedTokens: this.servedTokens,
      lookups: {
        count: this.lookups,
        failed: this.lookupsFailed,
        timedOut: this.lookupsTimedOut,
        blocksAsked: this.blocksAsked,
        blocksFound: this.blocksFound,
        latencyMs: { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) },
      },
      reads: { ...this.reads, failures: { ...this.reads.failures } },
      writes: { ...this.writes, failures: { ...this.writes.failures } },
      manifests: { written: this.manifestWrites, failed: this.manifestFailures, retried: this.manifestRetries },
      reconnects: this.connection.reconnects,
      connected: this.connection.connected,
      ranks: [...this.ranks.values()].sort((a, b) => a.rank - b.rank),
    };
  }

  private sample(ms: number): void {
    if (this.latencies.length < MAX_LATENCY_SAMPLES) this.latencies.push(ms);
    else this.latencies[Math.floor(Math.random() * MAX_LATENCY_SAMPLES)] = ms;
  }
}

function newCounts(): { blocks: number; succeeded: number; failed: number; failures: Record<string, number>; bytes: number } {
  return { blocks: 0, succeeded: 0, failed: 0, failures: {}, bytes: 0 };
}

/** Linear interpolation between the nearest ranks; null without samples. */
function quantile(sorted: Float64Array, q: number): number | null {
  if (sorted.length === 0) return null;
  const rank = q * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.min(low + 1, sorted.length - 1);
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}
