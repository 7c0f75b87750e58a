import { threadCpuUs } from '../core/thread-cpu.js';

/**
 * The calling thread's CPU time (the main thread, where the scheduler, the
 * serving loop and the HTTP server run) after a millisecond's sleep, so the
 * read falls on a fresh slice (core/thread-cpu.ts). The bench counts the
 * main thread alone: process.cpuUsage() would count the ranks' model work
 * too, whose run-to-run spread on a loaded machine is larger than what the
 * HTTP path adds.
 */
export async function threadCpuUsAfterSleep(): Promise<number | null> {
  await new Promise((resolve) => setTimeout(resolve, 1));
  return threadCpuUs();
}
