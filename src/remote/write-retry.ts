import type { RemoteJobFailure } from '../protocol/remote-jobs.js';

/**
 * How a failed remote write (a rank's shards of a block, a block's manifest)
 * is tried again: a transient failure (a timeout, a lost connection, a
 * server error, an injected fault) is retried after a backoff that doubles
 * each time, up to `writeAttempts` tries in all; then the write is given up
 * and counted. Retries wait on timers, never in the step loop, and none
 * starts once the tier is shutting down.
 */
export interface RemoteRetrySettings {
  /** Tries in all, the first included (>= 1; 1: never retried). */
  readonly writeAttempts: number;
  /** Wait before the first retry (ms); doubled for each further one. */
  readonly backoffMs: number;
}

/** No retry waits longer than this, however many doublings. */
const MAX_RETRY_DELAY_MS = 30_000;

/** The wait before retry `retry` (1 for the first). */
export function retryDelayMs(settings: RemoteRetrySettings, retry: number): number {
  const delay = settings.backoffMs * 2 ** Math.min(retry - 1, 30);
  return Math.min(delay, Math.max(settings.backoffMs, MAX_RETRY_DELAY_MS));
}

/**
 * Failures that may pass: a dropped write (too many in flight), a bad value
 * or a server that refuses the user (ACL, authentication) would fail the
 * same way again.
 */
export function retryableWriteFailure(failure: RemoteJobFailure, message = ''): boolean {
  if (REFUSALS.test(message)) return false;
  return failure === 'timeout' || failure === 'connection' || failure === 'server' || failure === 'injected';
}

/** Server replies that refuse the user rather than report a passing trouble. */
const REFUSALS = /^(NOPERM|NOAUTH|WRONGPASS)\b/;

/**
 * Backoff waits that shutdown can cut short: `wait` resolves true after its
 * delay, or false at once when `cancelAll` ran (then no retry may start).
 */
export class RetryWaits {
  private readonly cancels = new Set<() => void>();
  private stopped = false;

  wait(ms: number): Promise<boolean> {
    if (this.stopped) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const cancel = (): void => {
        clearTimeout(timer);
        this.cancels.delete(cancel);
        resolve(false);
      };
      const timer = setTimeout(() => {
        this.cancels.delete(cancel);
        resolve(true);
      }, ms);
      this.cancels.add(cancel);
    });
  }

  /** Ends every wait (as not to be retried) and refuses new ones until `resume`. */
  cancelAll(): void {
    this.stopped = true;
    for (const cancel of [...this.cancels]) cancel();
  }

  /** Waits are allowed again (after a reset, not after shutdown). */
  resume(): void {
    this.stopped = false;
  }

  get waiting(): number {
    return this.cancels.size;
  }
}

/** What writeWithRetries came to: items written, writes sent again (each time), items that never landed. */
export interface RetriedWrites {
  readonly written: number;
  readonly retried: number;
  readonly failed: number;
}

/**
 * Writes every item with `write`; the items whose write failed transiently
 * (a RemoteOperationError's kind, or a server error that is not a refusal)
 * are written again after the backoff, up to the configured tries, unless
 * `waits` were cancelled (shutdown) meanwhile.
 */
export async function writeWithRetries<T>(
  items: readonly T[],
  write: (item: T) => Promise<void>,
  settings: RemoteRetrySettings,
  waits: RetryWaits,
): Promise<RetriedWrites> {
  let written = 0;
  let retried = 0;
  let pending = items;
  for (let attempt = 1; ; attempt++) {
    const outcomes = await Promise.allSettled(pending.map(write));
    const failed = pending.filter((_, i) => outcomes[i].status === 'rejected');
    written += pending.length - failed.length;
    if (failed.length === 0) return { written, retried, failed: 0 };
    const error = (outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult).reason as { kind?: RemoteJobFailure; message?: string } | null;
    const transient = retryableWriteFailure(error?.kind ?? 'server', error?.message ?? '');
    if (!transient || attempt >= settings.writeAttempts || !(await waits.wait(retryDelayMs(settings, attempt)))) {
      return { written, retried, failed: failed.length };
    }
    retried += failed.length;
    pending = failed;
  }
}
