import * as Comlink from 'comlink';
import { Worker } from 'node:worker_threads';
import { RankError } from '../core/errors.js';
import type { RankStepOutput, SchedulerOutput } from '../scheduler/outputs.js';
import { threadEndpoint } from './comlink-endpoint.js';
import type { RankInit, RankReady, RankWorkerApi } from './rank-protocol.js';
import { workerScript } from './worker-path.js';

export interface ExecutorOptions {
  /** One init per rank, in rank order. */
  readonly ranks: readonly RankInit[];
  /** A step not answered by every rank within this time fails the rank. */
  readonly stepDeadlineMs: number;
  /** Time allowed to open a device (allocating a large CPU tier takes a while). */
  readonly initDeadlineMs?: number;
}

interface RankHandle {
  readonly rank: number;
  readonly worker: Worker;
  readonly api: Comlink.Remote<RankWorkerApi>;
  /** Rejects when the thread dies; never resolves. */
  readonly death: Promise<never>;
  dead: RankError | null;
  exited: boolean;
}

/**
 * Spawns one worker thread per rank, sends each step to all of them and
 * collects their outputs. A rank that exits, throws, or misses the deadline
 * surfaces as a RankError naming it: the engine never hangs on a rank.
 */
export class Executor {
  private readonly handles: RankHandle[] = [];
  private readyInfo: RankReady[] = [];

  private constructor(private readonly options: ExecutorOptions) {}

  static async start(options: ExecutorOptions): Promise<Executor> {
    const executor = new Executor(options);
    try {
      for (const init of options.ranks) executor.handles.push(executor.spawn(init.rank));
      executor.readyInfo = await Promise.all(executor.handles.map((h, i) => executor.initRank(h, options.ranks[i])));
    } catch (error) {
      await executor.terminateAll();
      throw error;
    }
    return executor;
  }

  get ready(): readonly RankReady[] {
    return this.readyInfo;
  }

  get tp(): number {
    return this.handles.length;
  }

  /**
   * Runs one step on every rank. Waits until every rank answered, died or
   * missed the deadline before it rejects with the first failure, so nothing
   * sent afterwards can interleave with a rank still inside this step.
   */
  async executeStep(step: SchedulerOutput): Promise<RankStepOutput[]> {
    const late = `missed the step deadline of ${this.options.stepDeadlineMs} ms at step ${step.step}`;
    const settled = await Promise.allSettled(
      this.handles.map((h) => this.guard(h, h.api.executeStep(step), this.options.stepDeadlineMs, late)),
    );
    const outputs: RankStepOutput[] = [];
    for (const result of settled) {
      if (result.status === 'rejected') throw result.reason;
      outputs.push(result.value);
    }
    return outputs;
  }

  /** Asks every live rank to drain its transfers and forget its state. */
  async resetRanks(): Promise<void> {
    await Promise.all(
      this.handles.map((h) => this.guard(h, h.api.reset(), this.options.stepDeadlineMs, 'did not finish its reset in time')),
    );
  }

  /** Replaces a dead (or any) rank with a fresh thread and device. */
  async restartRank(rank: number): Promise<RankReady> {
    const old = this.handles[rank];
    await old.worker.terminate().catch(() => undefined);
    const handle = this.spawn(rank);
    this.handles[rank] = handle;
    const info = await this.initRank(handle, this.options.ranks[rank]);
    this.readyInfo[rank] = info;
    return info;
  }

  /** Rank threads that have not exited yet. */
  liveThreads(): number {
    return this.handles.filter((h) => !h.exited).length;
  }

  /** Ranks known to be dead. */
  deadRanks(): RankError[] {
    return this.handles.flatMap((h) => (h.dead ? [h.dead] : []));
  }

  async pendingJobs(): Promise<number[]> {
    return Promise.all(this.handles.map((h) => this.guard(h, h.api.pendingJobs(), this.options.stepDeadlineMs, 'did not answer')));
  }

  async transferLogs(): Promise<unknown[][]> {
    return Promise.all(this.handles.map((h) => this.guard(h, h.api.transferLog(), this.options.stepDeadlineMs, 'did not answer')));
  }

  async faultStats(): Promise<{ loadBlocksFailed: number; storesFailed: number; jobsDelayed: number }[]> {
    return Promise.all(this.handles.map((h) => this.guard(h, h.api.faultStats(), this.options.stepDeadlineMs, 'did not answer')));
  }

  /** Shuts every rank down cleanly when it can, and terminates it otherwise. */
  async shutdown(): Promise<void> {
    await Promise.all(
      this.handles.map(async (h) => {
        if (!h.dead) {
          await this.guard(h, h.api.shutdown(), this.options.stepDeadlineMs, 'did not shut down in time').catch(() => undefined);
        }
        h.api[Comlink.releaseProxy]();
        await h.worker.terminate().catch(() => undefined);
      }),
    );
  }

  /** Terminates every rank at once (after a failure). */
  async terminateAll(): Promise<void> {
    await Promise.all(this.handles.map((h) => h.worker.terminate().catch(() => undefined)));
  }

  private spawn(rank: number): RankHandle {
    const worker = new Worker(workerScript('rank-worker'), { name: `kvtier-rank-${rank}` });
    const api = Comlink.wrap<RankWorkerApi>(threadEndpoint(worker));
    let handle!: RankHandle;
    const death = new Promise<never>((_, reject) => {
      worker.once('error', (error: Error) => {
        handle.dead ??= new RankError(rank, `uncaught error: ${error.message}`, { cause: error });
        reject(handle.dead);
      });
      worker.once('exit', (code) => {
        handle.exited = true;
        handle.dead ??= new RankError(rank, `worker thread exited with code ${code}`);
        reject(handle.dead);
      });
    });
    death.catch(() => undefined);
    handle = { rank, worker, api, death, dead: null, exited: false };
    return handle;
  }

  private initRank(handle: RankHandle, init: RankInit): Promise<RankReady> {
    const deadline = this.options.initDeadlineMs ?? Math.max(120_000, this.options.stepDeadlineMs);
    return this.guard(handle, handle.api.init(init), deadline, `did not open its device within ${deadline} ms`);
  }

  /** Races a rank call against the rank's death and a deadline. */
  private async guard<T>(handle: RankHandle, call: Promise<T>, deadlineMs: number, lateCause: string): Promise<T> {
    if (handle.dead) throw handle.dead;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        handle.dead ??= new RankError(handle.rank, lateCause);
        reject(handle.dead);
      }, deadlineMs);
    });
    try {
      return await Promise.race([call.catch((error: unknown) => this.rankCallFailed(handle, error)), handle.death, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private rankCallFailed(handle: RankHandle, error: unknown): never {
    const message = error instanceof Error ? error.message : String(error);
    handle.dead ??= new RankError(handle.rank, `step failed: ${message}`, { cause: error });
    throw handle.dead;
  }
}
