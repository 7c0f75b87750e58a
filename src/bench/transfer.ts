import { kvGeometry } from '../core/kv-geometry.js';
import { performance } from 'node:perf_hooks';
import { ConfigError } from '../core/errors.js';
import { openDevice } from '../device/device.js';
import { DeviceError } from '../device/errors.js';
import {
  COPY_METHODS,
  type BackendName,
  type CopyMethod,
  type Device,
  type DeviceFaults,
  type DeviceJobResult,
  type KvLayout,
} from '../device/types.js';
import { mix } from '../model/mix.js';
import { bytesPerGpuBlock, type ModelShape } from '../model/shape.js';
import type { TransferDirection } from '../protocol/step-protocol.js';
import { median } from './stats.js';
import { tpIssue } from '../config/engine-rules.js';
import { describeConfigIssue, objectNaming } from '../config/issues.js';

/**
 * The transfer bench (docs/architecture.md, "Benchmarks"): GB/s moving N blocks GPU->CPU,
 * CPU->GPU and both at once, against one contiguous copy of the same bytes in
 * the same run (the limit), for each model shape, tensor-parallel shard,
 * layout, block size and copy method.
 *
 * Block ids follow a realistic pattern: runs of 1..MAX_RUN blocks (uniform),
 * consecutive on both the GPU and the CPU side within a run, as a request's
 * freshly allocated blocks are; the runs sit in independent random orders on
 * the two sides, so consecutive runs are adjacent only by chance. A run is
 * what the device can coalesce into one copy (one per layer, per-layer).
 */

export type BenchDirection = TransferDirection | 'both';

export interface TransferBenchRow {
  readonly direction: BenchDirection;
  readonly layout: KvLayout;
  readonly blockTokens: number;
  readonly model: string;
  /** The shard of rank 0 of this many ranks. */
  readonly tp: number;
  /** Bytes of one block's region: the whole block (cross-layer) or one layer's part (per-layer). */
  readonly regionBytes: number;
  /** The device's copy method (the host backend copies with memcpy whichever it is). */
  readonly copyMethod: CopyMethod;
  /** Blocks per direction. */
  readonly blocks: number;
  /** Bytes moved (both directions together for 'both'). */
  readonly bytes: number;
  readonly gbps: number;
  readonly limitGbps: number;
  /** gbps / limitGbps. */
  readonly ratio: number;
}

export interface TransferBenchOptions {
  readonly backend: BackendName;
  readonly models: readonly ModelShape[];
  readonly layouts: readonly KvLayout[];
  /** Tokens per GPU block, e.g. 16, 32, 64, 128, 256. */
  readonly blockTokens: readonly number[];
  /** Blocks per direction per run; or give totalBytes. */
  readonly numBlocks?: number;
  /** Bytes per direction per run (rounded down to whole blocks, at least one). */
  readonly totalBytes?: number;
  /** Timed repeats per measurement; the median is reported. */
  readonly repeats: number;
  /** Shards to measure: rank 0 of each tp (default [1]: the whole model). */
  readonly tps?: readonly number[];
  /** One device per method (default ['auto']). */
  readonly copyMethods?: readonly CopyMethod[];
  readonly deviceIndex?: number;
  /** Seed of the block id pattern. */
  readonly seed?: number;
  /** Faults set on each device after it opens (stress runs: delays, device errors). */
  readonly faults?: DeviceFaults;
  readonly onRow?: (row: TransferBenchRow) => void;
}

/** Longest run of blocks adjacent on both sides. */
export const MAX_RUN = 8;

const DEFAULT_SEED = 0x7a11;

export async function runTransferBench(options: TransferBenchOptions): Promise<TransferBenchRow[]> {
  checkOptions(options);
  const rows: TransferBenchRow[] = [];
  for (const model of options.models) {
    for (const tp of options.tps ?? [1]) {
      for (const layout of options.layouts) {
        for (const blockTokens of options.blockTokens) {
          for (const copyMethod of options.copyMethods ?? ['auto']) {
            for (const row of await benchOneShape(options, { model, tp, layout, blockTokens, copyMethod })) {
              rows.push(row);
              options.onRow?.(row);
            }
          }
        }
      }
    }
  }
  return rows;
}

function checkOptions(o: TransferBenchOptions): void {
  const positiveInteger = (name: string, value: number | undefined) => {
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      throw new ConfigError(`transfer bench: ${name} = ${String(value)} must be a positive integer`);
    }
  };
  if (o.models.length === 0) throw new ConfigError('transfer bench: models must name at least one model');
  if (o.layouts.length === 0) throw new ConfigError('transfer bench: layouts must name at least one layout');
  if (o.blockTokens.length === 0) throw new ConfigError('transfer bench: blockTokens must list at least one size');
  o.blockTokens.forEach((tokens, i) => positiveInteger(`blockTokens[${i}]`, tokens));
  positiveInteger('repeats', o.repeats);
  positiveInteger('numBlocks', o.numBlocks);
  positiveInteger('totalBytes', o.totalBytes);
  if (o.tps?.length === 0) throw new ConfigError('transfer bench: tps must list at least one rank count');
  o.tps?.forEach((tp, i) => positiveInteger(`tps[${i}]`, tp));
  for (const model of o.models) {
    for (const tp of o.tps ?? []) {
      const issue = tpIssue(model, tp);
      if (issue !== null) throw new ConfigError(`transfer bench: ${describeConfigIssue(issue, objectNaming({ tp }))}`);
    }
  }
  if (o.copyMethods?.length === 0) throw new ConfigError('transfer bench: copyMethods must name at least one method');
  for (const method of o.copyMethods ?? []) {
    if (!COPY_METHODS.includes(method)) {
      throw new ConfigError(`transfer bench: copyMethods: '${String(method)}' must be 'kernel', 'dma' or 'auto'`);
    }
  }
  if ((o.numBlocks === undefined) === (o.totalBytes === undefined)) {
    throw new ConfigError('transfer bench: give exactly one of numBlocks and totalBytes');
  }
}

/** What one device is opened with. */
interface BenchShape {
  readonly model: ModelShape;
  readonly tp: number;
  readonly layout: KvLayout;
  readonly blockTokens: number;
  readonly copyMethod: CopyMethod;
}

async function benchOneShape(options: TransferBenchOptions, shape: BenchShape): Promise<TransferBenchRow[]> {
  const { model, tp, layout, blockTokens, copyMethod } = shape;
  const blockBytes = bytesPerGpuBlock(model, tp, blockTokens);
  const blocks = options.numBlocks ?? Math.max(1, Math.floor(options.totalBytes! / blockBytes));
  // Two disjoint halves on each side, so a store and a load can run at once;
  // one CPU chunk, so the contiguous copy has room.
  const device = await openDevice({
    backend: options.backend,
    rank: 0,
    deviceIndex: options.deviceIndex ?? 0,
    geometry: kvGeometry({ model, tp, blockSize: blockTokens, layout }),
    numGpuBlocks: 2 * blocks,
    numCpuBlocks: 2 * blocks,
    cpuChunkBytes: 2 * blocks * blockBytes,
    copyMethod,
  });
  try {
    if (options.faults) device.setFaults(options.faults);
    const random = new PatternRandom(mix(((options.seed ?? DEFAULT_SEED) ^ blockTokens) >>> 0));
    const storePattern = blockPattern(random, blocks, 0, 0);
    const loadPattern = blockPattern(random, blocks, blocks, blocks);
    const runner = new BenchRunner(device, copyMethod, layout);
    const bytes = blocks * blockBytes;

    // One untimed round first.
    await runner.blocks('gpuToCpu', storePattern);
    await runner.blocks('cpuToGpu', loadPattern);
    await runner.contiguousBoth(bytes);

    const measured: Record<BenchDirection, Timings> = {
      gpuToCpu: { blocks: [], limit: [] },
      cpuToGpu: { blocks: [], limit: [] },
      both: { blocks: [], limit: [] },
    };
    for (let i = 0; i < options.repeats; i++) {
      measured.gpuToCpu.blocks.push(await runner.blocks('gpuToCpu', storePattern));
      measured.gpuToCpu.limit.push(await runner.contiguous('gpuToCpu', bytes));
      measured.cpuToGpu.blocks.push(await runner.blocks('cpuToGpu', loadPattern));
      measured.cpuToGpu.limit.push(await runner.contiguous('cpuToGpu', bytes));
      measured.both.blocks.push(await runner.blocksBoth(storePattern, loadPattern));
      measured.both.limit.push(await runner.contiguousBoth(bytes));
    }
    const row = (direction: BenchDirection, movedBytes: number, ms: Timings): TransferBenchRow => {
      const gbps = movedBytes / (median(ms.blocks) * 1e6);
      const limitGbps = movedBytes / (median(ms.limit) * 1e6);
      const ratio = gbps / limitGbps;
      return {
        direction,
        layout,
        blockTokens,
        model: model.name,
        tp,
        regionBytes: layout === 'per-layer' ? blockBytes / model.layers : blockBytes,
        copyMethod,
        blocks,
        bytes: movedBytes,
        gbps,
        limitGbps,
        ratio,
      };
    };
    return [
      row('gpuToCpu', bytes, measured.gpuToCpu),
      row('cpuToGpu', bytes, measured.cpuToGpu),
      row('both', 2 * bytes, measured.both),
    ];
  } finally {
    device.close();
  }
}

/** Durations (ms) of the block copies and of the contiguous copies, one per repeat. */
interface Timings {
  readonly blocks: number[];
  readonly limit: number[];
}

/** GPU and CPU block ids of one transfer job, in job order. */
export interface BlockPattern {
  readonly gpuBlockIds: Int32Array;
  readonly cpuBlockIds: Int32Array;
}

/**
 * `count` blocks from [gpuBase, gpuBase + count) and [cpuBase, cpuBase + count):
 * runs of 1..MAX_RUN blocks, consecutive on both sides within a run, laid out
 * in independent random orders on the two sides.
 */
export function blockPattern(random: PatternRandom, count: number, gpuBase: number, cpuBase: number): BlockPattern {
  const runs: number[] = [];
  for (let left = count; left > 0; ) {
    const length = Math.min(left, 1 + random.below(MAX_RUN));
    runs.push(length);
    left -= length;
  }
  const gpuStarts = placeRuns(runs, random.permutation(runs.length), gpuBase);
  const cpuStarts = placeRuns(runs, random.permutation(runs.length), cpuBase);
  const gpuBlockIds = new Int32Array(count);
  const cpuBlockIds = new Int32Array(count);
  let i = 0;
  runs.forEach((length, run) => {
    for (let j = 0; j < length; j++, i++) {
      gpuBlockIds[i] = gpuStarts[run] + j;
      cpuBlockIds[i] = cpuStarts[run] + j;
    }
  });
  return { gpuBlockIds, cpuBlockIds };
}

/** Start of each run when the runs are laid out back to back in `order`. */
function placeRuns(runs: readonly number[], order: readonly number[], base: number): number[] {
  const starts = new Array<number>(runs.length);
  let next = base;
  for (const run of order) {
    starts[run] = next;
    next += runs[run];
  }
  return starts;
}

/** A small counter-based generator (murmur3 fmix32 over a Weyl sequence). */
export class PatternRandom {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform integer in [0, n). */
  below(n: number): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    return mix(this.state) % n;
  }

  permutation(n: number): number[] {
    const out = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = this.below(i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
}

/** What the bench submitted as one job, to say which job failed. */
interface SubmittedJob {
  readonly direction: TransferDirection;
  readonly blocks: number;
  /** Runs of blocks adjacent on both sides: what the device coalesces. */
  readonly runs: number;
}

/** Runs of blocks adjacent on both the GPU and the CPU side. */
export function countRuns(pattern: BlockPattern): number {
  const { gpuBlockIds: gpu, cpuBlockIds: cpu } = pattern;
  let runs = 0;
  for (let i = 0; i < gpu.length; i++) if (i === 0 || gpu[i] !== gpu[i - 1] + 1 || cpu[i] !== cpu[i - 1] + 1) runs++;
  return runs;
}

/** Runs the timed operations of one device. */
class BenchRunner {
  private nextJobId = 1;
  private readonly submitted = new Map<number, SubmittedJob>();
  /** Results polled but not yet claimed by the call that waited for them. */
  private readonly results = new Map<number, DeviceJobResult>();

  constructor(
    private readonly device: Device,
    private readonly copyMethod: CopyMethod,
    private readonly layout: KvLayout,
  ) {}

  /** One job moving the pattern; its duration as the device measured it (ms). */
  async blocks(direction: TransferDirection, pattern: BlockPattern): Promise<number> {
    const jobId = this.submit(direction, pattern);
    await this.device.waitJobs([jobId]);
    return this.elapsed([jobId])[0];
  }

  /** A store and a load submitted together; wall time until both finished (ms). */
  async blocksBoth(storePattern: BlockPattern, loadPattern: BlockPattern): Promise<number> {
    const started = performance.now();
    const ids = [this.submit('gpuToCpu', storePattern), this.submit('cpuToGpu', loadPattern)];
    await this.device.waitJobs(ids);
    const wall = performance.now() - started;
    this.elapsed(ids);
    return wall;
  }

  async contiguous(direction: TransferDirection, bytes: number): Promise<number> {
    return this.timeContiguous(direction, bytes);
  }

  /** Both contiguous copies at once (they touch disjoint bytes); wall time (ms). */
  async contiguousBoth(bytes: number): Promise<number> {
    const started = performance.now();
    await Promise.all([this.timeContiguous('gpuToCpu', bytes), this.timeContiguous('cpuToGpu', bytes)]);
    return performance.now() - started;
  }

  private async timeContiguous(direction: TransferDirection, bytes: number): Promise<number> {
    if (!this.device.timeContiguousCopy) {
      throw new DeviceError('transfer bench: this device cannot time a contiguous copy');
    }
    const ms = await this.device.timeContiguousCopy(direction, bytes);
    if (!(ms > 0)) throw new DeviceError(`transfer bench: the contiguous ${direction} copy of ${bytes} bytes finished but the device could not time it`);
    return ms;
  }

  private submit(direction: TransferDirection, pattern: BlockPattern): number {
    const jobId = this.nextJobId++;
    this.submitted.set(jobId, { direction, blocks: pattern.gpuBlockIds.length, runs: countRuns(pattern) });
    this.device.submitTransfer({
      jobId,
      direction,
      gpuBlockIds: pattern.gpuBlockIds,
      cpuBlockIds: pattern.cpuBlockIds,
      // Nothing computes during the bench: no compute ordering to wait for.
      orderAfterCompute: false,
    });
    return jobId;
  }

  /**
   * The finished jobs' device times. Throws naming the job (direction,
   * blocks, bytes, regions, copy method) and what went wrong: failed on the
   * device (with its error), finished untimed, or missing from the results
   * although waitJobs said it finished.
   */
  private elapsed(jobIds: readonly number[]): number[] {
    for (const result of this.device.pollFinished()) this.results.set(result.jobId, result);
    return jobIds.map((id) => {
      const result = this.results.get(id);
      this.results.delete(id);
      const job = this.submitted.get(id);
      this.submitted.delete(id);
      if (result === undefined) throw this.jobError(id, job, 'finished but is missing from pollFinished()');
      if (!result.ok) {
        throw this.jobError(id, job, `failed on the device: ${result.error ?? 'no device error (an injected store or load failure)'}`, result);
      }
      if (!(result.elapsedMs > 0)) throw this.jobError(id, job, 'finished but the device could not time it', result);
      return result.elapsedMs;
    });
  }

  private jobError(id: number, job: SubmittedJob | undefined, what: string, result?: DeviceJobResult): DeviceError {
    const info = this.device.info;
    const shape =
      job === undefined
        ? 'not submitted by this bench'
        : `${job.direction}, ${job.blocks} blocks, ${job.blocks * info.bytesPerGpuBlock} bytes, ` +
          `${job.runs} runs of adjacent blocks${this.layout === 'per-layer' ? ', one region per layer each' : ', one region each'}`;
    const method = `copy method ${this.copyMethod}${result?.copyPath ? ` (${result.copyPath})` : ''}`;
    return new DeviceError(`transfer bench: job ${id} (${shape}; ${method}) ${what}`);
  }
}
