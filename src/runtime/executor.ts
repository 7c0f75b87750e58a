import * as Comlink from 'comlink';
import { Worker } from 'node:worker_threads';
import { RankError } from '../core/errors.js';
import { RankFaultLedger } from '../faults/fault-ledger.js';
import type { TransferLogEntry } from '../connector/worker-connector.js';
import type { RankStepOutput, SchedulerOutput } from '../protocol/step-protocol.js';
import { threadEndpoint } from './comlink-endpoint.js';
import { DEFAULT_START_DEADLINE_MS } from '../config/limits.js';
import type { RankFaultStats, RankReady, RankSetup, RankState, RankWorkerApi } from '../rank/rank-protocol.js';
import { workerScript } from './worker-path.js';

export interface ExecutorOptions {
  /** One setup per rank, in rank order. */
  readonly ranks: readonly RankSetup[];
  /** A step (or reset) not answered by every rank within this time fails the rank. */
  readonly stepDeadlineMs: number;
  /** Time allowed to open a device, at start and on a restart (allocating a large CPU tier takes a while). */
  readonly initDeadlineMs?: number;
  /** Called as each rank finished opening its device at start. */
  readonly onRankOpened?: (rank: number) => void;
}

interface RankHandle {
  readonly rank: number;
  readonly worker: Worker;
  readonly api: Comlink.Remote<RankWorkerApi>;
  /**
   * Called once when the thread dies. Calls in flight listen here and stop
   * listening when they settle: a promise raced by every call for as long as
   * the rank lives would keep every step's reaction (and output) alive.
   */
  readonly deathListeners: Set<(error: RankError) => void>;
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
  /** Threads replaced by a restart; they count as live until they exited. */
  private readonly retired: RankHandle[] = [];
  private readyInfo: RankReady[] = [];
  /** Device opens and load failures per rank, carried over a restart. */
  private readonly faults: RankFaultLedger;
  private resetCount = 0;

  private constructor(private readonly options: ExecutorOptions) {
    this.faults = new RankFaultLedger(options.ranks.length);
  }

  static async start(options: ExecutorOptions): Promise<Executor> {
    const executor = new Executor(options);
    try {
      for (const setup of options.ranks) executor.handles.push(executor.spawn(setup.rank));
      executor.readyInfo = await Promise.all(
        executor.handles.map(async (h) => {
          const info = await executor.initRank(h);
          options.onRankOpened?.(h.rank);
          return info;
        }),
      );
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
      this.handles.map((h) => this.guard(h, 'step', h.api.executeStep(step), this.options.stepDeadlineMs, late)),
    );
    for (const result of settled) if (result.status === 'fulfilled') this.faults.stepAnswered(result.value);
    return this.valuesOrFirstFailure(settled);
  }

  /**
   * Asks every rank to drain its transfers and forget its state. Like a step,
   * it settles on every rank before it reports a failure, so a retried reset
   * never overlaps one still running.
   */
  async resetRanks(): Promise<void> {
    const resetCount = ++this.resetCount;
    const late = `did not finish reset ${resetCount} within ${this.options.stepDeadlineMs} ms`;
    const settled = await Promise.allSettled(
      this.handles.map((h) => this.guard(h, 'reset', h.api.reset(resetCount), this.options.stepDeadlineMs, late)),
    );
    this.valuesOrFirstFailure(settled);
  }

  /** Replaces every dead rank with a fresh thread and device; returns their ranks. */
  async restartDeadRanks(): Promise<number[]> {
    const dead = this.handles.filter((h) => h.dead !== null).map((h) => h.rank);
    for (const rank of dead) await this.restartRank(rank);
    return dead;
  }

  /** Replaces a rank with a fresh thread and device (the old thread is terminated first). */
  async restartRank(rank: number): Promise<RankReady> {
    const old = this.handles[rank];
    this.retired.push(old);
    await this.terminate(old);
    const handle = this.spawn(rank);
    this.handles[rank] = handle;
    const info = await this.initRank(handle);
    this.readyInfo[rank] = info;
    return info;
  }

  /** Ends a rank's thread now, between steps: the next call to it finds the rank dead, as after a crash. */
  async killRank(rank: number): Promise<void> {
    const handle = this.handles[rank];
    if (!handle) throw new RangeError(`rank ${rank} is not a rank of this executor (tp ${this.handles.length})`);
    await this.terminate(handle);
  }

  /** Per rank, in rank order: whether its current thread is alive (not dead, not declared dead). */
  ranksAlive(): boolean[] {
    return this.handles.map((h) => h.dead === null);
  }

  /** Rank threads that have not exited yet, including replaced ones that are still ending. */
  liveThreads(): number {
    return [...this.handles, ...this.retired].filter((h) => !h.exited).length;
  }

  async pendingJobs(): Promise<number[]> {
    return this.askEveryRank((api) => api.pendingJobs());
  }

  async rankStates(): Promise<RankState[]> {
    return this.askEveryRank((api) => api.state());
  }

  async transferLogs(): Promise<TransferLogEntry[][]> {
    return this.askEveryRank((api) => api.transferLog());
  }

  async faultStats(): Promise<RankFaultStats[]> {
    return this.askEveryRank((api) => api.faultStats());
  }

  /** Shuts every rank down cleanly when it can, and terminates it otherwise. */
  async shutdown(): Promise<void> {
    await Promise.all(
      this.handles.map(async (h) => {
        if (!h.dead) {
          const late = 'did not shut down in time';
          await this.guard(h, 'shutdown', h.api.shutdown(), this.options.stepDeadlineMs, late).catch(() => undefined);
        }
        h.api[Comlink.releaseProxy]();
        await this.terminate(h);
      }),
    );
    await Promise.all(this.retired.map((h) => this.terminate(h)));
  }

  /** Terminates every rank at once (after a failure). */
  async terminateAll(): Promise<void> {
    await Promise.all([...this.handles, ...this.retired].map((h) => this.terminate(h)));
  }

  private spawn(rank: number): RankHandle {
    const worker = new Worker(workerScript('rank-thread'), { name: `kvtier-rank-${rank}` });
    const api = Comlink.wrap<RankWorkerApi>(threadEndpoint(worker));
    const handle: RankHandle = { rank, worker, api, deathListeners: new Set(), dead: null, exited: false };
    const died = (error: RankError): void => {
      for (const listener of [...handle.deathListeners]) listener(error);
      handle.deathListeners.clear();
    };
    worker.once('error', (error: Error) => {
      handle.dead ??= new RankError(rank, `uncaught error: ${error.message}`, { cause: error });
      died(handle.dead);
    });
    worker.once('exit', (code) => {
      handle.exited = true;
      handle.dead ??= new RankError(rank, `worker thread exited with code ${code}`);
      died(handle.dead);
    });
    return handle;
  }

  private initRank(handle: RankHandle): Promise<RankReady> {
    const rank = handle.rank;
    const deadline = this.options.initDeadlineMs ?? DEFAULT_START_DEADLINE_MS;
    const init = { ...this.options.ranks[rank], ...this.faults.deviceOpened(rank) };
    return this.guard(handle, 'init', handle.api.init(init), deadline, `did not open its device within ${deadline} ms`);
  }

  /**
   * Terminates a rank's thread (its device is released as the thread ends).
   * Bounded: a thread stuck where termination cannot reach it stays counted
   * by liveThreads() instead of hanging the engine.
   */
  private async terminate(handle: RankHandle): Promise<void> {
    if (handle.exited) return;
    let timer: NodeJS.Timeout | undefined;
    const giveUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.options.stepDeadlineMs);
    });
    await Promise.race([handle.worker.terminate().then(() => undefined, () => undefined), giveUp]);
    clearTimeout(timer);
  }

  private async askEveryRank<T>(ask: (api: Comlink.Remote<RankWorkerApi>) => Promise<T>): Promise<T[]> {
    return Promise.all(this.handles.map((h) => this.guard(h, 'query', ask(h.api), this.options.stepDeadlineMs, 'did not answer')));
  }

  private valuesOrFirstFailure<T>(settled: readonly PromiseSettledResult<T>[]): T[] {
    const values: T[] = [];
    for (const result of settled) {
      if (result.status === 'rejected') throw result.reason;
      values.push(result.value);
    }
    return values;
  }

  /**
   * Settles with a rank call, the rank's death or the deadline, whichever
   * comes first. Nothing of the call stays referenced once it settled.
   */
  private guard<T>(handle: RankHandle, what: string, call: Promise<T>, deadlineMs: number, lateCause: string): Promise<T> {
    if (handle.dead) return Promise.reject(handle.dead);
    return new Promise<T>((resolve, reject) => {
      const settle = (): void => {
        clearTimeout(timer);
        handle.deathListeners.delete(onDeath);
      };
      const onDeath = (error: RankError): void => {
        settle();
        reject(error);
      };
      const timer = setTimeout(() => {
        handle.dead ??= new RankError(handle.rank, lateCause);
        onDeath(handle.dead);
      }, deadlineMs);
      handle.deathListeners.add(onDeath);
      call.then(
        (value) => {
          settle();
          resolve(value);
        },
        (error: unknown) => {
          settle();
          try {
            this.rankCallFailed(handle, what, error);
          } catch (failure) {
            reject(failure);
          }
        },
      );
    });
  }

  private rankCallFailed(handle: RankHandle, what: string, error: unknown): never {
    const message = error instanceof Error ? error.message : String(error);
    handle.dead ??= new RankError(handle.rank, `${what} failed: ${message}`, { cause: error });
    throw handle.dead;
  }
}
