/**
 * Which requests wait for which in-flight load jobs. A request waits for the
 * load it issued and for every load still writing blocks it hit in the GPU
 * prefix cache; it may run once all of them finished.
 */
export class LoadWaits {
  private readonly jobsByRequest = new Map<string, Set<number>>();
  private readonly requestsByJob = new Map<number, Set<string>>();

  wait(reqId: string, jobIds: Iterable<number>): void {
    let jobs = this.jobsByRequest.get(reqId);
    if (jobs === undefined) {
      jobs = new Set();
      this.jobsByRequest.set(reqId, jobs);
    }
    for (const jobId of jobIds) {
      jobs.add(jobId);
      let reqs = this.requestsByJob.get(jobId);
      if (reqs === undefined) {
        reqs = new Set();
        this.requestsByJob.set(jobId, reqs);
      }
      reqs.add(reqId);
    }
  }

  /** true while the request waits for at least one job. */
  isWaiting(reqId: string): boolean {
    return (this.jobsByRequest.get(reqId)?.size ?? 0) > 0;
  }

  /** Job `jobId` finished; returns the requests that no longer wait for anything. */
  complete(jobId: number): string[] {
    const reqs = this.requestsByJob.get(jobId);
    if (reqs === undefined) return [];
    this.requestsByJob.delete(jobId);
    const ready: string[] = [];
    for (const reqId of reqs) {
      const jobs = this.jobsByRequest.get(reqId);
      if (jobs === undefined) continue;
      jobs.delete(jobId);
      if (jobs.size === 0) {
        this.jobsByRequest.delete(reqId);
        ready.push(reqId);
      }
    }
    return ready;
  }

  /** The request no longer waits (finished, aborted). */
  drop(reqId: string): void {
    const jobs = this.jobsByRequest.get(reqId);
    if (jobs === undefined) return;
    this.jobsByRequest.delete(reqId);
    for (const jobId of jobs) {
      const reqs = this.requestsByJob.get(jobId);
      reqs?.delete(reqId);
      if (reqs !== undefined && reqs.size === 0) this.requestsByJob.delete(jobId);
    }
  }

  clear(): void {
    this.jobsByRequest.clear();
    this.requestsByJob.clear();
  }
}
