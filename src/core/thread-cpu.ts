import { readFileSync, readlinkSync } from 'node:fs';

/**
 * CPU time of one thread of this process, in microseconds, from Linux's
 * schedstat (its first field: nanoseconds on the CPU): the calling thread
 * (`/proc/thread-self`), or another by its kernel id (`/proc/self/task/<tid>`).
 * process.cpuUsage() counts every thread at once. null where the file
 * cannot be read (not Linux, or no scheduler statistics).
 *
 * The kernel adds a running thread's current slice only at the next tick
 * or switch: a caller timing itself reads just after a sleep (a fresh slice).
 */
export function threadCpuUs(kernelThreadId: number | null = null): number | null {
  const path = kernelThreadId === null ? '/proc/thread-self/schedstat' : `/proc/self/task/${kernelThreadId}/schedstat`;
  try {
    const runNs = Number(readFileSync(path, 'latin1').split(' ')[0]);
    return Number.isFinite(runNs) ? runNs / 1000 : null;
  } catch {
    return null;
  }
}

/** The calling thread's id in the kernel (/proc/thread-self -> <pid>/task/<tid>), for threadCpuUs from another thread; null off Linux. */
export function kernelThreadId(): number | null {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isSafeInteger(tid) ? tid : null;
  } catch {
    return null;
  }
}
