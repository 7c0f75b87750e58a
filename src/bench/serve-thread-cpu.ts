import { readFileSync } from 'node:fs';

/**
 * CPU time of the calling thread (the main thread, where the scheduler,
 * the serving loop and the HTTP server run), in microseconds: Linux's
 * /proc/thread-self/schedstat (nanoseconds on the CPU). process.cpuUsage()
 * counts every thread, the ranks' model work too, whose run-to-run spread
 * on a loaded machine is larger than what the HTTP path adds. null where
 * the file cannot be read (not Linux, or no scheduler statistics).
 *
 * The kernel adds a running thread's current slice only at the next tick
 * or switch: callers read it just after a sleep (a fresh slice).
 */
export function threadCpuUs(): number | null {
  try {
    const runNs = Number(readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]);
    return Number.isFinite(runNs) ? runNs / 1000 : null;
  } catch {
    return null;
  }
}

/** Sleeps a millisecond, then reads threadCpuUs() on a fresh slice. */
export async function threadCpuUsAfterSleep(): Promise<number | null> {
  await new Promise((resolve) => setTimeout(resolve, 1));
  return threadCpuUs();
}
