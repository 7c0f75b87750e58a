import { performance } from 'node:perf_hooks';
import type { Device } from '../device/types.js';
import { RemoteValueError } from './errors.js';
import type { RemoteFaults } from './remote-faults.js';
import type { RemoteFetchSpec, RemoteJobFailure, RemoteJobResult, RemoteRankInit, RemoteStepMetadata, RemoteWriteSpec } from '../protocol/remote-jobs.js';
import { shardKey, type RemoteNamespace } from './remote-keys.js';
import { RemoteOperationError, RemoteStore } from './remote-store.js';
import { parseRemoteUrl } from './remote-url.js';
import { decodeShard, encodeShard } from './value-format.js';

/**
 * One rank's side of the remote tier: moves this rank's shard of each block
 * between its CPU tier and the remote, over its own connection. Nothing here
 * blocks a step: writes copy the block's bytes out at the start of the step
 * (the block is ready, so nothing writes it) and send them in the
 * background; fetches write a CPU block (reserved as being stored, so
 * nothing reads it) when the value arrived and checked out. Results are
 * reported with the next step's output.
 */
export class RankRemoteTier {
  private readonly store: RemoteStore;
  private readonly ns: RemoteNamespace;
  private readonly finished: RemoteJobResult[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private writeBlocksInFlight = 0;
  /** Bumped by reset: results of jobs started before it are dropped. */
  private epoch = 0;

  constructor(
    private readonly device: Device,
    private readonly rank: number,
    tp: number,
    private readonly init: RemoteRankInit,
    private readonly faults: RemoteFaults | null = null,
  ) {
    const switches = init.testSwitches ?? {};
    this.store = new RemoteStore({
      address: parseRemoteUrl(init.url),
      timeoutMs: init.timeoutMs,
      cluster: init.cluster && !switches.ignoreCluster,
    });
    this.ns = {
      name: init.namespace,
      digest: Buffer.from(init.namespaceDigestHex, 'hex'),
      blockTokens: init.blockTokens,
      tp,
    };
  }

  /** Connects (bounded by the timeout); a rank that cannot connect yet keeps retrying and fails its jobs meanwhile. */
  async start(): Promise<void> {
    await this.store.connect().catch(() => {});
  }

  /** Step start: copy out and send this step's writes, then start its fetches. */
  startStep(meta: RemoteStepMetadata, step = 0): void {
    for (const spec of meta.writes) {
      const injected = this.faults?.failureAt(step, spec.jobId) ?? null;
      if (injected !== null) this.finished.push(result(spec.jobId, 'write', injected, 0, 0));
      else this.startWrite(spec);
    }
    for (const spec of meta.fetches) {
      const injected = this.faults?.failureAt(step, spec.jobId) ?? null;
      const ok = injected !== null && this.init.testSwitches?.reportFailedFetchesAsOk === true;
      if (injected !== null) this.finished.push(result(spec.jobId, 'fetch', ok ? null : injected, 0, 0));
      else this.startFetch(spec);
    }
  }

  /** Jobs finished since the last call. */
  collect(): RemoteJobResult[] {
    return this.finished.splice(0, this.finished.length);
  }

  pendingCount(): number {
    return this.inFlight.size + this.finished.length;
  }

  /** Waits (bounded) until some job in flight finished, so idle steps do not spin. */
  async waitForProgress(timeoutMs: number): Promise<void> {
    if (this.inFlight.size === 0 || this.finished.length > 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([Promise.race(this.inFlight), timeout]);
    clearTimeout(timer);
  }

  /** Waits for every job in flight (they are bounded by the timeout), then forgets them. */
  async drainAndReset(): Promise<void> {
    this.epoch++;
    await Promise.allSettled([...this.inFlight]);
    this.finished.length = 0;
  }

  async close(): Promise<void> {
    await this.drainAndReset();
    await this.store.close();
  }

  private startWrite(spec: RemoteWriteSpec): void {
    const t0 = performance.now();
    const n = spec.blocks.length;
    if (this.writeBlocksInFlight + n > this.init.maxInFlightWrites) {
      this.finished.push(result(spec.jobId, 'write', 'dropped', 0, 0));
      return;
    }
    // Copied now: the block may be evicted and reused by a later step's store.
    const values = spec.blocks.map((b) =>
      encodeShard(this.ns, { digest: Buffer.from(b.digestHex, 'hex'), rank: this.rank }, this.device.readCpuBlock(b.cpuBlockId)),
    );
    this.writeBlocksInFlight += n;
    const epoch = this.epoch;
    this.track(
      Promise.all(spec.blocks.map((b, i) => this.store.set(shardKey(this.ns, b.digestHex, this.rank), values[i]))).then(
        () => this.report(epoch, result(spec.jobId, 'write', null, bytesOf(values), performance.now() - t0)),
        (error: unknown) => this.report(epoch, result(spec.jobId, 'write', failureOf(error), 0, performance.now() - t0)),
      ).finally(() => {
        this.writeBlocksInFlight -= n;
      }),
    );
  }

  private startFetch(spec: RemoteFetchSpec): void {
    const t0 = performance.now();
    const epoch = this.epoch;
    const switches = this.init.testSwitches ?? {};
    const expected = this.device.info.bytesPerCpuBlock;
    const fetch = async (): Promise<number> => {
      const values = await Promise.all(spec.blocks.map((b) => this.store.get(shardKey(this.ns, b.digestHex, this.rank))));
      // Check every value before writing any block.
      const payloads = values.map((value, i) => {
        if (value === null) throw new RemoteOperationError('miss', `shard ${this.rank} of block ${spec.blocks[i].digestHex} is gone`);
        if (switches.skipValueCheck) return value.subarray(value.length - expected);
        return decodeShard(this.ns, { digest: Buffer.from(spec.blocks[i].digestHex, 'hex'), rank: this.rank }, expected, value);
      });
      if (epoch !== this.epoch) return 0;
      payloads.forEach((payload, i) => this.device.writeCpuBlock(spec.blocks[i].cpuBlockId, payload));
      return payloads.reduce((sum, p) => sum + p.length, 0);
    };
    this.track(
      fetch().then(
        (bytes) => this.report(epoch, result(spec.jobId, 'fetch', null, bytes, performance.now() - t0)),
        (error: unknown) => {
          const failure = failureOf(error);
          const ok = switches.reportFailedFetchesAsOk === true;
          this.report(epoch, result(spec.jobId, 'fetch', ok ? null : failure, 0, performance.now() - t0));
        },
      ),
    );
  }

  private report(epoch: number, r: RemoteJobResult): void {
    if (epoch === this.epoch) this.finished.push(r);
  }

  private track(promise: Promise<void>): void {
    this.inFlight.add(promise);
    void promise.finally(() => this.inFlight.delete(promise));
  }
}

function result(jobId: number, kind: RemoteJobResult['kind'], failure: RemoteJobFailure | null, bytes: number, elapsedMs: number): RemoteJobResult {
  return { jobId, kind, ok: failure === null, failure, bytes, elapsedMs };
}

function bytesOf(values: readonly Buffer[]): number {
  let sum = 0;
  for (const v of values) sum += v.length;
  return sum;
}

function failureOf(error: unknown): RemoteJobFailure {
  if (error instanceof RemoteOperationError) return error.kind;
  if (error instanceof RemoteValueError) return 'value';
  return 'server';
}
