import { performance } from 'node:perf_hooks';
import type { Device } from '../device/types.js';
import { RemoteValueError } from './errors.js';
import type { RemoteFaults } from './remote-faults.js';
import type {
  RemoteBlockRef,
  RemoteFetchSpec,
  RemoteJobFailure,
  RemoteJobResult,
  RemoteRankHealth,
  RemoteRankInit,
  RemoteStepMetadata,
  RemoteWriteSpec,
} from '../protocol/remote-jobs.js';
import { shardKey, type RemoteNamespace } from './remote-keys.js';
import { RemoteOperationError, RemoteStore } from './remote-store.js';
import { parseRemoteUrl } from './remote-url.js';
import { authBytes, ValueSealer, valueFlags } from './value-auth.js';
import { quietClientWarnings } from './client-warnings.js';
import { checkShardHeader, checksumMismatch, HEADER_BYTES, writeShardHeader } from './value-format.js';
import { retryableWriteFailure, retryDelayMs, RetryWaits } from './write-retry.js';

/**
 * Encoded values are sent in batches of about this many bytes as they are
 * encoded, so the connection carries the first while the next are copied out
 * (large values go one by one, small ones many to a write). Reads ask for
 * about as many bytes per command, and load each reply as it arrives.
 */
const SEND_BATCH_BYTES = 1 << 20;

/** One shard value of a write job, kept until the job settled so a failed send can be repeated. */
interface ShardWrite {
  readonly key: string;
  readonly value: Buffer;
}

/** A failure the fault plan injected in place of a send. */
class InjectedWriteFailure extends Error {
  constructor(readonly failure: RemoteJobFailure) {
    super(`injected remote write failure (${failure})`);
  }
}

/** How a write job ended after its tries. */
class WriteJobFailure extends Error {
  constructor(
    override readonly cause: unknown,
    readonly retries: number,
    readonly gaveUp: boolean,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

interface UnsentWrite {
  readonly key: string;
  readonly value: Buffer;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * One rank's side of the remote tier: moves this rank's shard of each block
 * between its CPU tier and the remote, over its own connection. Nothing here
 * blocks a step: writes copy the block's bytes out at the start of the step
 * (the block is ready, so nothing writes it) and send them in the
 * background; fetches write a CPU block (reserved as being stored, so
 * nothing reads it) as each value arrives, checking it in the same pass. A
 * job is reported (with the next step's output) only once every value of it
 * settled, so no value lands in a block after its job failed and the block
 * was freed; a failed job's blocks are never used.
 */
export class RankRemoteTier {
  private readonly store: RemoteStore;
  private readonly ns: RemoteNamespace;
  /** With a secret: seals values written and opens values read (value-auth.ts). */
  private readonly sealer: ValueSealer | null;
  /** Header flags every value of this tier carries, and the bytes of its MAC section. */
  private readonly flags: number;
  private readonly authBytes: number;
  private readonly finished: RemoteJobResult[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private writeBlocksInFlight = 0;
  /** Encoded writes not sent yet (see queueWrite). */
  private unsent: UnsentWrite[] = [];
  private unsentBytes = 0;
  /** Where small values are cut from (see allocValue). */
  private slab: Buffer | null = null;
  private slabUsed = 0;
  /** Bumped by reset: results of jobs started before it are dropped. */
  private epoch = 0;
  /** What this rank's writes came to (dropped writes aside), for its health. */
  private wroteAny = false;
  private writeFailed = false;
  private lastWriteError: string | null = null;
  /** The health last reported (see healthChange). */
  private reportedHealth = '';
  /** Backoff waits of failed writes; cut short by a reset or shutdown. */
  private readonly retryWaits = new RetryWaits();
  /** The step last started (retries ask the fault plan about the step they run in). */
  private step = 0;

  constructor(
    private readonly device: Device,
    private readonly rank: number,
    tp: number,
    private readonly init: RemoteRankInit,
    private readonly faults: RemoteFaults | null = null,
  ) {
    const switches = init.testSwitches ?? {};
    quietClientWarnings();
    this.store = new RemoteStore({
      address: parseRemoteUrl(init.url),
      timeoutMs: init.timeoutMs,
      cluster: init.cluster && !switches.ignoreCluster,
      ownSetBatches: true,
    });
    this.ns = {
      name: init.namespace,
      digest: Buffer.from(init.namespaceDigestHex, 'hex'),
      blockTokens: init.blockTokens,
      tp,
    };
    this.sealer = init.auth ? new ValueSealer(init.auth) : null;
    this.flags = valueFlags(init.auth ?? null);
    this.authBytes = authBytes(init.auth ?? null);
  }

  /** Connects (bounded by the timeout); a rank that cannot connect yet keeps retrying and fails its jobs meanwhile. */
  async start(): Promise<void> {
    await this.store.connect().catch(() => {});
  }

  /** Step start: copy out and send this step's writes, then start its fetches. */
  startStep(meta: RemoteStepMetadata, step = 0): void {
    this.step = step;
    try {
      // An injected failure stands for the first send: the bytes are copied out all the same, so a retry can land.
      for (const spec of meta.writes) this.startWrite(spec);
    } finally {
      // Even when a copy failed: the writes queued before it settle.
      this.sendWrites();
    }
    for (const spec of meta.fetches) {
      const injected = this.faults?.failureAt(step, spec.jobId) ?? null;
      const ok = injected !== null && this.init.testSwitches?.reportFailedFetchesAsOk === true;
      if (injected !== null) this.finished.push(result(spec.jobId, 'fetch', ok ? null : injected, 0, 0));
      else this.startFetch(spec);
    }
  }

  /** This rank's standing with the remote tier when it changed since the last call, else null. */
  healthChange(): RemoteRankHealth | null {
    const connected = this.store.connected;
    const key = `${connected} ${this.wroteAny} ${this.writeFailed}`;
    if (key === this.reportedHealth) return null;
    this.reportedHealth = key;
    const lastError = connected ? (this.lastWriteError ?? this.store.lastError) : (this.store.lastError ?? this.lastWriteError);
    return { rank: this.rank, connected, wroteAny: this.wroteAny, writeFailed: this.writeFailed, lastError };
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

  /** Waits for every job in flight (they are bounded by the timeout; no retry starts meanwhile), then forgets them. */
  async drainAndReset(): Promise<void> {
    this.epoch++;
    this.retryWaits.cancelAll();
    await Promise.allSettled([...this.inFlight]);
    this.finished.length = 0;
    this.retryWaits.resume();
  }

  /** Shutdown: writes waiting for a retry are given up, never sent again. */
  async close(): Promise<void> {
    this.retryWaits.cancelAll();
    this.epoch++;
    await Promise.allSettled([...this.inFlight]);
    this.finished.length = 0;
    await this.store.close();
  }

  private startWrite(spec: RemoteWriteSpec): void {
    const t0 = performance.now();
    const n = spec.blocks.length;
    if (this.writeBlocksInFlight + n > this.init.maxInFlightWrites) {
      this.finished.push(result(spec.jobId, 'write', 'dropped', 0, 0));
      return;
    }
    // Copied now: the block may be evicted and reused by this step's stores.
    const shards: ShardWrite[] = [];
    const sets: Promise<void>[] = [];
    let bytes = 0;
    const injected = this.faults?.failureAt(this.step, spec.jobId) ?? null;
    try {
      for (const b of spec.blocks) {
        const key = shardKey(this.ns, b.digestHex, this.rank);
        const value = this.encodeBlock(key, b);
        bytes += value.length;
        shards.push({ key, value });
        if (injected === null) sets.push(this.queueWrite(key, value));
      }
    } catch (error) {
      // The job was not started; what of it was queued is sent and forgotten.
      void Promise.allSettled(sets);
      throw error;
    }
    this.writeBlocksInFlight += n;
    const epoch = this.epoch;
    const first = injected === null ? sets : shards.map(() => Promise.reject(new InjectedWriteFailure(injected)));
    this.track(
      this.settleWrite(spec.jobId, shards, first, epoch).then(
        (retries) => {
          this.wroteAny = true;
          this.report(epoch, { ...result(spec.jobId, 'write', null, bytes, performance.now() - t0), retries });
        },
        (error: WriteJobFailure) => {
          this.writeFailed = true;
          this.lastWriteError = error.message;
          const failed = result(spec.jobId, 'write', failureOf(error.cause), 0, performance.now() - t0);
          this.report(epoch, { ...failed, retries: error.retries, gaveUp: error.gaveUp });
        },
      ).finally(() => {
        this.writeBlocksInFlight -= n;
      }),
    );
  }

  /**
   * Waits for a write job's sends; shards whose send failed transiently are
   * sent again after a backoff, up to the configured tries. Resolves with the
   * retries it took; rejects with a WriteJobFailure once a failure is not
   * transient, the tries are used up, or a reset or shutdown began.
   */
  private async settleWrite(jobId: number, shards: readonly ShardWrite[], first: readonly Promise<void>[], epoch: number): Promise<number> {
    const { writeAttempts } = this.init.retry;
    let pending = shards;
    let sends = first;
    for (let attempt = 1; ; attempt++) {
      const outcomes = await Promise.allSettled(sends);
      const failed: ShardWrite[] = [];
      let cause: unknown = null;
      outcomes.forEach((o, i) => {
        if (o.status === 'fulfilled') return;
        failed.push(pending[i]);
        cause ??= o.reason;
      });
      if (failed.length === 0) return attempt - 1;
      const transient = retryableWriteFailure(failureOf(cause), cause instanceof Error ? cause.message : '');
      if (!transient) throw new WriteJobFailure(cause, attempt - 1, false);
      if (attempt >= writeAttempts || epoch !== this.epoch) throw new WriteJobFailure(cause, attempt - 1, true);
      const waited = await this.retryWaits.wait(retryDelayMs(this.init.retry, attempt));
      if (!waited || epoch !== this.epoch) throw new WriteJobFailure(cause, attempt - 1, true);
      pending = failed;
      const injected = this.faults?.failureAt(this.step, jobId, attempt) ?? null;
      if (injected !== null) {
        sends = pending.map(() => Promise.reject(new InjectedWriteFailure(injected)));
        continue;
      }
      sends = pending.map((w) => this.queueWrite(w.key, w.value));
      this.sendWrites();
    }
  }

  private startFetch(spec: RemoteFetchSpec): void {
    const t0 = performance.now();
    const epoch = this.epoch;
    const switches = this.init.testSwitches ?? {};
    const fetch = async (): Promise<number> => {
      let failure: unknown = null;
      let bytes = 0;
      const load = (blocks: readonly RemoteBlockRef[], keys: readonly string[], values: readonly (Buffer | null)[]): void => {
        for (let i = 0; i < blocks.length; i++) {
          if (failure !== null || epoch !== this.epoch) return;
          try {
            bytes += this.loadBlock(blocks[i], keys[i], values[i], switches.skipValueCheck === true);
          } catch (error) {
            failure = error;
          }
        }
      };
      // Values are loaded as each group arrives, while the next groups are still on the way.
      const groups: Promise<void>[] = [];
      const per = this.blocksPerRead();
      for (let start = 0; start < spec.blocks.length; start += per) {
        const blocks = spec.blocks.slice(start, start + per);
        const keys = blocks.map((b) => shardKey(this.ns, b.digestHex, this.rank));
        groups.push(
          this.store.getMany(keys).then(
            (values) => load(blocks, keys, values),
            (error: unknown) => {
              failure ??= error;
            },
          ),
        );
      }
      await Promise.all(groups);
      if (failure !== null) throw failure;
      return epoch === this.epoch ? bytes : 0;
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

  /** Blocks read with one command: about SEND_BATCH_BYTES of values, at least one. */
  private blocksPerRead(): number {
    return Math.max(1, Math.floor(SEND_BATCH_BYTES / (HEADER_BYTES + this.authBytes + this.device.info.bytesPerCpuBlock)));
  }

  /** Queues one SET; the queue is sent once it holds SEND_BATCH_BYTES, and at the end of startStep. */
  private queueWrite(key: string, value: Buffer): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.unsent.push({ key, value, resolve, reject });
      this.unsentBytes += value.length;
      if (this.unsentBytes >= SEND_BATCH_BYTES) this.sendWrites();
    });
  }

  private sendWrites(): void {
    if (this.unsent.length === 0) return;
    const batch = this.unsent;
    this.unsent = [];
    this.unsentBytes = 0;
    const sent = this.store.setNow(batch.map((w) => [w.key, w.value] as const));
    sent.forEach((promise, i) => promise.then(batch[i].resolve, batch[i].reject));
  }

  /** One shard value: header, then the block's bytes copied and checksummed in one pass; sealed with a secret. */
  private encodeBlock(key: string, block: RemoteBlockRef): Buffer {
    const length = this.device.info.bytesPerCpuBlock;
    const value = this.allocValue(HEADER_BYTES + this.authBytes + length);
    const checksum = this.device.readCpuBlockInto(block.cpuBlockId, value, HEADER_BYTES + this.authBytes);
    writeShardHeader(value, this.ns, { digest: Buffer.from(block.digestHex, 'hex'), rank: this.rank }, length, checksum, this.flags);
    this.sealer?.seal(key, value, HEADER_BYTES);
    return value;
  }

  /**
   * Room for one value. Small values are cut from a shared slab of
   * SEND_BATCH_BYTES: one allocation per batch instead of one (an ArrayBuffer
   * for the collector to track) per value.
   */
  private allocValue(size: number): Buffer {
    if (size * 4 > SEND_BATCH_BYTES) return Buffer.allocUnsafeSlow(size);
    if (this.slab === null || this.slab.length - this.slabUsed < size) {
      this.slab = Buffer.allocUnsafeSlow(SEND_BATCH_BYTES);
      this.slabUsed = 0;
    }
    const value = this.slab.subarray(this.slabUsed, this.slabUsed + size);
    // Values start 64-byte aligned, as a fresh allocation would.
    this.slabUsed = Math.min(this.slab.length, (this.slabUsed + size + 63) & ~63);
    return value;
  }

  /**
   * Checks a fetched value's header (and with a secret its MAC, or decrypts
   * it), copies its payload into the block and compares the checksum computed
   * on the way; payload bytes on success. On a mismatch the block holds bad
   * bytes, and the job fails: its blocks are freed, never loaded.
   */
  private loadBlock(block: RemoteBlockRef, key: string, value: Buffer | null, skipCheck: boolean): number {
    if (value === null) throw new RemoteOperationError('miss', `shard ${this.rank} of block ${block.digestHex} is gone`);
    const length = this.device.info.bytesPerCpuBlock;
    if (skipCheck) {
      this.device.writeCpuBlockFrom(block.cpuBlockId, value, Math.max(0, value.length - length));
      return length;
    }
    const expected = checkShardHeader(this.ns, { digest: Buffer.from(block.digestHex, 'hex'), rank: this.rank }, length, value, this.flags);
    const payload = this.sealer?.open(key, value, HEADER_BYTES) ?? { bytes: value, offset: HEADER_BYTES };
    if (this.device.writeCpuBlockFrom(block.cpuBlockId, payload.bytes, payload.offset) !== expected) throw checksumMismatch();
    return length;
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

function failureOf(error: unknown): RemoteJobFailure {
  if (error instanceof InjectedWriteFailure) return error.failure;
  if (error instanceof RemoteOperationError) return error.kind;
  if (error instanceof RemoteValueError) return 'value';
  return 'server';
}
