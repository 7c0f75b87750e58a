import type { Request } from './request.js';

/**
 * Finished requests whose GPU blocks must outlive them: a load the request
 * issued is still writing its blocks, or stores are still reading them. The
 * blocks are released once nothing touches them any more.
 */
interface Hold {
  readonly request: Request;
  loadJob: number | null;
  awaitingSend: boolean;
}

export class FinishedHolds {
  private readonly byRequest = new Map<string, Hold>();
  private readonly byLoadJob = new Map<number, Hold>();

  hold(request: Request, loadJob: number | null, awaitingSend: boolean): void {
    const hold: Hold = { request, loadJob, awaitingSend };
    this.byRequest.set(request.id, hold);
    if (loadJob !== null) this.byLoadJob.set(loadJob, hold);
  }

  has(reqId: string): boolean {
    return this.byRequest.has(reqId);
  }

  get size(): number {
    return this.byRequest.size;
  }

  /** Load `jobId` finished; returns the request whose blocks are now free to release, if any. */
  loadFinished(jobId: number): Request | null {
    const hold = this.byLoadJob.get(jobId);
    if (hold === undefined) return null;
    this.byLoadJob.delete(jobId);
    hold.loadJob = null;
    return this.releaseIfIdle(hold);
  }

  /** Every store of the request completed on every rank. */
  sendingFinished(reqId: string): Request | null {
    const hold = this.byRequest.get(reqId);
    if (hold === undefined) return null;
    hold.awaitingSend = false;
    return this.releaseIfIdle(hold);
  }

  /** Requests still held (tests, leak reports). */
  requests(): Request[] {
    return Array.from(this.byRequest.values(), (h) => h.request);
  }

  clear(): void {
    this.byRequest.clear();
    this.byLoadJob.clear();
  }

  private releaseIfIdle(hold: Hold): Request | null {
    if (hold.loadJob !== null || hold.awaitingSend) return null;
    this.byRequest.delete(hold.request.id);
    return hold.request;
  }
}
