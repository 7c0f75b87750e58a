/**
 * The remote tier's part of the step protocol (plain data, crosses threads).
 * The scheduler side decides which blocks move; every rank moves its own
 * shard with its own connection and reports per job; a job counts as done
 * when every rank reported it, and failed if any rank's part failed
 * (docs/architecture.md, "Remote tier").
 */

/** One offloaded block of a remote job: its remote digest (hex) and its CPU block id. */
export interface RemoteBlockRef {
  readonly digestHex: string;
  readonly cpuBlockId: number;
}

/** Read these blocks' shards from the remote into CPU blocks (reserved as being stored). */
export interface RemoteFetchSpec {
  readonly jobId: number;
  readonly blocks: readonly RemoteBlockRef[];
}

/** Write these ready CPU blocks' shards to the remote. Each rank copies the bytes out at the start of the step. */
export interface RemoteWriteSpec {
  readonly jobId: number;
  readonly blocks: readonly RemoteBlockRef[];
}

export interface RemoteStepMetadata {
  readonly fetches: readonly RemoteFetchSpec[];
  readonly writes: readonly RemoteWriteSpec[];
}

export type RemoteJobKind = 'fetch' | 'write';

/** How a job's part failed on a rank (see RemoteFailureKind). */
export type RemoteJobFailure = 'miss' | 'timeout' | 'connection' | 'value' | 'dropped' | 'server' | 'injected';

/** One rank's outcome of a remote job, or the outcome merged over ranks. */
export interface RemoteJobResult {
  readonly jobId: number;
  readonly kind: RemoteJobKind;
  readonly ok: boolean;
  /** Set when ok is false: the first failure seen. */
  readonly failure: RemoteJobFailure | null;
  /** Payload bytes moved (summed over ranks once merged). */
  readonly bytes: number;
  /** Wall time of the job on the rank in ms (max over ranks once merged). */
  readonly elapsedMs: number;
  /** Writes: times the rank sent the job's failed shards again (max over ranks once merged); absent: 0. */
  readonly retries?: number;
  /** Writes: the job still failed transiently after its last try, or shutdown cut its retries short (any rank); absent: false. */
  readonly gaveUp?: boolean;
}

/**
 * One rank's standing with the remote tier, sent with a step's output when it
 * changed: a rank that cannot reach the server, or whose writes all fail,
 * is shown in the report and in kvtier_remote_connected{rank}.
 */
export interface RemoteRankHealth {
  readonly rank: number;
  /** The rank's connection is up. */
  readonly connected: boolean;
  /** Some write of this rank succeeded, and some failed (dropped writes aside), so far. */
  readonly wroteAny: boolean;
  readonly writeFailed: boolean;
  /** The rank's last connection or write error, or null. */
  readonly lastError: string | null;
}

/** What a rank needs to reach the remote tier. */
export interface RemoteRankInit {
  /** The remote URL (the worker parses it; it never prints it unmasked). */
  readonly url: string;
  readonly cluster: boolean;
  readonly timeoutMs: number;
  /** Namespace name and digest (hex) that every value's header carries. */
  readonly namespace: string;
  readonly namespaceDigestHex: string;
  readonly blockTokens: number;
  /** Blocks whose writes may be in flight on this rank; writes beyond it are dropped and counted. */
  readonly maxInFlightWrites: number;
  /** How a failed write is tried again (src/remote/write-retry.ts). */
  readonly retry: { readonly writeAttempts: number; readonly backoffMs: number };
  /** With a secret: the namespace's value keys (derived from it; the secret itself stays on the main thread). */
  readonly auth?: RemoteAuthKeys | null;
  readonly testSwitches?: RemoteTestSwitches;
}

/** Keys that seal and open values (see src/remote/value-auth.ts), in hex. */
export interface RemoteAuthKeys {
  readonly mode: 'mac' | 'encrypt';
  readonly macKeyHex: string;
  readonly encKeyHex: string | null;
}

/** Test-only switches that turn one remote tier behaviour off each. */
export interface RemoteTestSwitches {
  /** Load a remote value without checking its header and checksum. */
  readonly skipValueCheck?: boolean;
  /** Report a failed fetch as ok, so the scheduler takes CPU blocks the fetch never filled. */
  readonly reportFailedFetchesAsOk?: boolean;
  /** Talk to a cluster as if it were a single server (no slot routing). */
  readonly ignoreCluster?: boolean;
  /** Never write manifests, so no block is ever announced as present. */
  readonly skipManifests?: boolean;
  /** Ask the remote for every waiting request at once, however far back in the queue (no lookahead window). */
  readonly lookupWholeQueue?: boolean;
}
