import { WorkerConnector, type TransferLogEntry, type WorkerConnectorState } from '../connector/worker-connector.js';
import type { Device } from '../device/types.js';
import type { CopyJobSpan, KVConnectorOutput, OffloadStepMetadata } from '../protocol/step-protocol.js';
import type { RankRemoteTier } from '../remote/rank-remote.js';
import { RemoteFaults } from '../remote/remote-faults.js';
import type { RankInit } from './rank-protocol.js';

/**
 * A tier behind the CPU tier as one rank sees it: it takes its part of each
 * step's metadata at the step's start, reports what it finished with the
 * rank's connector output, and drains, resets and closes with the rank.
 */
export interface RankTierPeer {
  startStep(meta: OffloadStepMetadata, step: number): void;
  /** Waits (at most `timeoutMs`) until some job of the tier finished. */
  waitForProgress(timeoutMs: number): Promise<void>;
  /** The rank's connector output with what this tier finished since the last step added. */
  report(output: KVConnectorOutput): KVConnectorOutput;
  pendingCount(): number;
  drainAndReset(): Promise<void>;
  close(): Promise<void>;
}

/** The remote tier's rank side as a peer: its writes and fetches ride on the step's `remote` metadata. */
function remotePeer(remote: RankRemoteTier): RankTierPeer {
  return {
    startStep: (meta, step) => {
      if (meta.remote) remote.startStep(meta.remote, step);
    },
    waitForProgress: (timeoutMs) => remote.waitForProgress(timeoutMs),
    report: (output) => {
      const health = remote.healthChange();
      return { ...output, remoteJobs: remote.collect(), ...(health ? { remoteHealth: health } : {}) };
    },
    pendingCount: () => remote.pendingCount(),
    drainAndReset: () => remote.drainAndReset(),
    close: () => remote.close(),
  };
}

/**
 * One rank's tiers below the GPU, composed: the worker side of the CPU
 * tier's connector, and the peers behind it (the remote tier), built from
 * the rank's setup. The rank worker drives this one object through the step
 * protocol; the scheduler side composes the same tiers into one connector.
 */
export class RankTiers {
  private constructor(
    private readonly connector: WorkerConnector,
    private readonly peers: readonly RankTierPeer[],
  ) {}

  /** The tiers of `init` over this rank's open device (the remote tier connects here). */
  static async open(device: Device, init: RankInit): Promise<RankTiers> {
    const connector = new WorkerConnector(device, init.testSwitches ?? {});
    if (init.deviceTrace === true) connector.recordCopyJobSpans();
    const peers: RankTierPeer[] = [];
    if (init.remote) {
      // Loaded only with a remote tier: the client library costs every rank thread start-up time otherwise.
      const { RankRemoteTier } = await import('../remote/rank-remote.js');
      const faults = new RemoteFaults(init.faultRules, init.faultSeed, init.rank);
      const remote = new RankRemoteTier(device, init.rank, init.geometry.tp, init.remote, faults.empty ? null : faults);
      await remote.start();
      peers.push(remotePeer(remote));
    }
    return new RankTiers(connector, peers);
  }

  /**
   * Step start: the peers take their part of the metadata first (remote
   * writes copy their ready CPU blocks out before any transfer of this step
   * can reuse them), then preempted requests' stores read their blocks
   * before anything can overwrite them (step a).
   */
  async beginStep(step: number, meta: OffloadStepMetadata | null): Promise<void> {
    if (meta === null) return;
    for (const peer of this.peers) peer.startStep(meta, step);
    await this.connector.flushPreempted(step, meta.flushReqIds);
  }

  markFinished(reqIds: readonly string[]): void {
    this.connector.markFinished(reqIds);
  }

  /** Step b: last step's stores, fenced write-backs, then this step's loads; returns the fenced jobs. */
  startTransfers(step: number, meta: OffloadStepMetadata): number[] {
    return this.connector.startTransfers(step, meta);
  }

  /** In-flight loads writing any of these GPU blocks. */
  loadsWriting(blockIds: Iterable<number>): number[] {
    return this.connector.loadsWriting(blockIds);
  }

  /** Step d: this step's stores, submitted at the next step's start. */
  queueStores(step: number, meta: OffloadStepMetadata): void {
    this.connector.queueStores(step, meta);
  }

  /** Copies and remote reads progress independently: waits for all at once, each bounded by `timeoutMs`. */
  async waitForProgress(timeoutMs: number): Promise<void> {
    await Promise.all([this.connector.waitForProgress(timeoutMs), ...this.peers.map((p) => p.waitForProgress(timeoutMs))]);
  }

  /** Step e: what every tier finished since the last step. */
  collect(): KVConnectorOutput {
    let output = this.connector.collect();
    for (const peer of this.peers) output = peer.report(output);
    return output;
  }

  pendingCount(): number {
    let count = this.connector.pendingCount();
    for (const peer of this.peers) count += peer.pendingCount();
    return count;
  }

  async drainAndReset(): Promise<void> {
    await this.connector.drainAndReset();
    for (const peer of this.peers) await peer.drainAndReset();
  }

  /** Drains the CPU tier's jobs and closes the peers (the remote connection). */
  async close(): Promise<void> {
    await this.connector.drainAndReset();
    for (const peer of this.peers) await peer.close();
  }

  state(): WorkerConnectorState {
    return this.connector.state();
  }

  transferLog(): readonly TransferLogEntry[] {
    return this.connector.transferLog();
  }

  /** The CPU tier's copy jobs finished since the last call, as the device timed them (remote tier reads and writes are not device stream work). */
  takeCopyJobSpans(): CopyJobSpan[] {
    return this.connector.takeCopyJobSpans();
  }
}
