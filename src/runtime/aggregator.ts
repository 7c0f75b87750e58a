import { EngineError } from '../core/errors.js';
import type { RemoteJobResult, RemoteRankHealth } from '../protocol/remote-jobs.js';
import type {
  JobResult,
  ModelRunnerOutput,
  RankStepOutput,
  SchedulerOutput,
} from '../protocol/step-protocol.js';
import { sampleStepTokens } from './sampling.js';

interface PendingJob {
  remaining: number;
  ok: boolean;
  failedGpuBlockIds: Set<number>;
  bytes: number;
  elapsedMs: number;
  direction: JobResult['direction'];
}

/**
 * Merges the ranks' outputs of a step (docs/architecture.md, "Aggregation rules"). A job or
 * request counts as finished only when every rank reported it (ranks may
 * report in different steps); a job failed if any rank's part failed;
 * failed-load block ids are the union over ranks. The sampled tokens come
 * from the ranks' summed digests (sampling.ts).
 */
export class KVOutputAggregator {
  private readonly expected: number;
  private readonly jobs = new Map<number, PendingJob>();
  private readonly sending = new Map<string, number>();
  private readonly recving = new Map<string, number>();
  private readonly remoteJobs = new Map<number, { remaining: number; merged: RemoteJobResult }>();

  constructor(
    worldSize: number,
    private readonly vocabSize: number,
  ) {
    if (!Number.isInteger(worldSize) || worldSize < 1) throw new EngineError(`aggregator: worldSize ${worldSize} must be >= 1`);
    this.expected = worldSize;
  }

  aggregate(outputs: readonly RankStepOutput[], schedulerOutput: SchedulerOutput): ModelRunnerOutput {
    const step = schedulerOutput.step;
    for (const out of outputs) {
      if (out.step !== step) throw new EngineError(`rank ${out.rank} answered step ${out.step} for step ${step}`);
    }

    const finishedJobs: JobResult[] = [];
    const finishedSending = new Set<string>();
    const finishedRecving = new Set<string>();
    const invalidBlockIds = new Set<number>();
    let remoteJobs: RemoteJobResult[] | undefined;
    let remoteHealth: RemoteRankHealth[] | undefined;

    for (const out of outputs) {
      for (const part of out.connector.remoteJobs ?? []) {
        const merged = this.mergeRemoteJob(part);
        if (merged) (remoteJobs ??= []).push(merged);
      }
      if (out.connector.remoteHealth) (remoteHealth ??= []).push(out.connector.remoteHealth);
      for (const job of out.connector.finishedJobs) {
        const merged = this.mergeJob(job);
        if (merged) finishedJobs.push(merged);
      }
      for (const reqId of out.connector.finishedSending) {
        if (this.countDown(this.sending, reqId)) finishedSending.add(reqId);
      }
      for (const reqId of out.connector.finishedRecving) {
        if (this.countDown(this.recving, reqId)) finishedRecving.add(reqId);
      }
      for (const blockId of out.connector.invalidBlockIds) invalidBlockIds.add(blockId);
    }

    return {
      step,
      sampledTokens: sampleStepTokens(outputs, schedulerOutput, this.vocabSize),
      finishedJobs,
      finishedSending,
      finishedRecving,
      invalidBlockIds,
      ...(remoteJobs ? { remoteJobs } : {}),
      ...(remoteHealth ? { remoteHealth } : {}),
    };
  }

  /** Jobs some but not all ranks reported. */
  pendingJobIds(): number[] {
    return [...this.jobs.keys()];
  }

  /** Forgets partial reports (after the ranks were reset together). */
  reset(): void {
    this.jobs.clear();
    this.sending.clear();
    this.recving.clear();
    this.remoteJobs.clear();
  }

  /** A remote job is done when every rank reported it; it failed if any rank's part failed (the first failure is kept). */
  private mergeRemoteJob(part: RemoteJobResult): RemoteJobResult | null {
    const entry = this.remoteJobs.get(part.jobId);
    const merged: RemoteJobResult = entry
      ? {
          ...entry.merged,
          ok: entry.merged.ok && part.ok,
          failure: entry.merged.failure ?? part.failure,
          bytes: entry.merged.bytes + part.bytes,
          elapsedMs: Math.max(entry.merged.elapsedMs, part.elapsedMs),
          retries: Math.max(entry.merged.retries ?? 0, part.retries ?? 0),
          gaveUp: (entry.merged.gaveUp ?? false) || (part.gaveUp ?? false),
        }
      : part;
    const remaining = (entry?.remaining ?? this.expected) - 1;
    if (remaining > 0) {
      this.remoteJobs.set(part.jobId, { remaining, merged });
      return null;
    }
    this.remoteJobs.delete(part.jobId);
    return merged;
  }

  private mergeJob(part: JobResult): JobResult | null {
    let job = this.jobs.get(part.jobId);
    if (!job) {
      job = {
        remaining: this.expected,
        ok: true,
        failedGpuBlockIds: new Set(),
        bytes: 0,
        elapsedMs: 0,
        direction: part.direction,
      };
      this.jobs.set(part.jobId, job);
    }
    job.ok &&= part.ok;
    for (const id of part.failedGpuBlockIds) job.failedGpuBlockIds.add(id);
    job.bytes += part.bytes;
    job.elapsedMs = Math.max(job.elapsedMs, part.elapsedMs);
    job.remaining -= 1;
    if (job.remaining > 0) return null;
    this.jobs.delete(part.jobId);
    return {
      jobId: part.jobId,
      direction: job.direction,
      ok: job.ok,
      failedGpuBlockIds: [...job.failedGpuBlockIds].sort((a, b) => a - b),
      bytes: job.bytes,
      elapsedMs: job.elapsedMs,
    };
  }

  private countDown(counts: Map<string, number>, reqId: string): boolean {
    const remaining = (counts.get(reqId) ?? this.expected) - 1;
    if (remaining > 0) {
      counts.set(reqId, remaining);
      return false;
    }
    counts.delete(reqId);
    return true;
  }
}
