import type { TransferJobSpec } from '../protocol/step-protocol.js';

/**
 * Coalescing a step's transfer jobs into copy jobs (docs/architecture.md,
 * "Device layer"): the scheduler issues one transfer job per request and
 * direction, but the device pays a fixed cost per job (events, waits, the
 * batch call, a completion), which small jobs cannot hide. Measured on an
 * H100 over PCIe Gen5 x16: engine store jobs averaging 4.9 MiB moved at
 * 26.2 GB/s over their device time while load jobs averaging 184 MiB moved
 * at 40.7; one copy job of 1 MiB reached 12-37 GB/s, 4 MiB 15-47, 16 MiB
 * 13-51 against a contiguous copy's 54; beside the model, jobs of 64 MiB
 * kept 35-38 GB/s where 16 MiB jobs kept 32-35.
 */

/**
 * The largest copy job (bytes on one rank) built from several transfer jobs.
 * 64 MiB is where the measured rate stopped rising (see above), and is what
 * the link moves in about 1.2 ms at 54 GB/s: a request whose blocks share a
 * job with others' waits at most that much longer for its completion, well
 * under one step of a large model. It also stays within the copy tile
 * buffers the CUDA backend sizes at open, so a coalesced job never makes it
 * allocate on the step path. A single transfer job larger than this is
 * never split: its request is reported by one completion.
 */
export const MAX_COPY_JOB_BYTES = 64 * 2 ** 20;

/**
 * Groups transfer jobs of one direction, in order, into copy jobs of at most
 * `maxBytes` (one job alone may exceed it). Only a group's first job may
 * skip sub-blocks of its first CPU block (the device skips them for the
 * whole copy job only there), and no destination block repeats within a
 * group: two jobs writing the same block stay separate jobs, which the copy
 * stream runs in order.
 */
export function groupIntoCopyJobs(
  specs: readonly TransferJobSpec[],
  bytesPerGpuBlock: number,
  maxBytes: number = MAX_COPY_JOB_BYTES,
): TransferJobSpec[][] {
  if (!(bytesPerGpuBlock > 0)) throw new RangeError(`bytesPerGpuBlock ${bytesPerGpuBlock} must be positive`);
  if (!(maxBytes > 0)) throw new RangeError(`maxBytes ${maxBytes} must be positive`);
  const groups: TransferJobSpec[][] = [];
  let group: TransferJobSpec[] = [];
  let groupBytes = 0;
  const destinations = new Set<number>();
  for (const spec of specs) {
    const bytes = spec.gpuBlockIds.length * bytesPerGpuBlock;
    const targets = spec.direction === 'cpuToGpu' ? spec.gpuBlockIds : spec.cpuBlockIds;
    const fits =
      group.length > 0 &&
      groupBytes + bytes <= maxBytes &&
      spec.firstSubBlock === 0 &&
      !targets.some((id) => destinations.has(id));
    if (!fits && group.length > 0) {
      groups.push(group);
      group = [];
      groupBytes = 0;
      destinations.clear();
    }
    group.push(spec);
    groupBytes += bytes;
    for (const id of targets) destinations.add(id);
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/** One copy job's block lists: its jobs' lists end to end, skipping what its first job skips. */
export function copyJobBlocks(group: readonly TransferJobSpec[]): { gpuBlockIds: number[]; cpuBlockIds: number[]; firstSubBlock: number } {
  const gpuBlockIds: number[] = [];
  const cpuBlockIds: number[] = [];
  for (const spec of group) {
    for (const id of spec.gpuBlockIds) gpuBlockIds.push(id);
    for (const id of spec.cpuBlockIds) cpuBlockIds.push(id);
  }
  return { gpuBlockIds, cpuBlockIds, firstSubBlock: group[0]?.firstSubBlock ?? 0 };
}
