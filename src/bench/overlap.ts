import { kvGeometry } from '../core/kv-geometry.js';
import { performance } from 'node:perf_hooks';
import { ConfigError } from '../core/errors.js';
import { openDevice } from '../device/device.js';
import { DeviceError } from '../device/errors.js';
import type {
  BackendName,
  CopyMethod,
  Device,
  DeviceFaults,
  DeviceJobResult,
  ForwardBatch,
  KvLayout,
} from '../device/types.js';
import { bytesPerGpuBlock, type ModelShape } from '../model/shape.js';
import type { TransferDirection } from '../protocol/step-protocol.js';
import { checkIntegerAtLeast, median } from './stats.js';
import { tpIssue } from '../config/engine-rules.js';
import { describeConfigIssue, objectNaming } from '../config/issues.js';

/**
 * The overlap bench (docs/architecture.md, "Benchmarks"): how much a forward step slows down
 * while stores (GPU -> CPU) and loads (CPU -> GPU) run beside it, on the same
 * device in the same run. Rounds alternate a phase of forwards alone with a
 * phase of forwards during which both copy streams are kept busy, so drift
 * in the machine's speed hits both sides alike.
 *
 * The forward is one step of the reference model over a batch of requests,
 * each computing `newTokens` tokens after `contextTokens` cached ones; it
 * reads every cached position of every request (the digest), as attention
 * would. Transfers touch blocks the forward never reads or writes, so
 * nothing orders one after the other: any slowdown is interference (shared
 * memory bandwidth, copy engines, cores), not waiting.
 *
 * During a busy phase a pump keeps JOBS_PER_QUEUE jobs of about `jobBytes`
 * queued per direction, submitting a new job as each one finishes, so the
 * copies run for the whole phase; copyBusyShare says how much of it the less
 * busy copy stream actually spent copying. The busy phases run stores and
 * loads together, stores only or loads only (`transfers`), and each copy
 * method (`copyMethods`) gets its own device.
 */

/** Which copy streams the busy phases keep busy. */
export type OverlapTransfers = 'both' | 'stores' | 'loads';

export const OVERLAP_TRANSFERS: readonly OverlapTransfers[] = ['both', 'stores', 'loads'];

export interface OverlapBenchRow {
  readonly model: string;
  readonly layout: KvLayout;
  readonly blockTokens: number;
  /** The device's copy method (the host backend copies with memcpy whichever it is). */
  readonly copyMethod: CopyMethod;
  /** Copies running during the busy phases. */
  readonly transfers: OverlapTransfers;
  /** Requests per forward. */
  readonly batch: number;
  /** Cached tokens of each request before the step. */
  readonly contextTokens: number;
  /** The CPU tier's bytes, and whether each job's CPU blocks were scattered over it. */
  readonly cpuTierBytes: number;
  readonly scatteredCpuBlocks: boolean;
  /** Tokens each request computes per step (1: a decode step). */
  readonly newTokens: number;
  /** Timed forwards per mode (alone, with transfers). */
  readonly steps: number;
  /** Median wall time of one forward, alone and with stores and loads running (ms). */
  readonly stepMsAlone: number;
  readonly stepMsWithTransfers: number;
  /** stepMsWithTransfers / stepMsAlone - 1. */
  readonly slowdown: number;
  /**
   * The same forwards timed on the device (start to end on the compute
   * stream, no JS wake-up in it): medians alone and beside the copies, and
   * their ratio - 1; null where the device does not time its forwards.
   */
  readonly deviceStepMsAlone: number | null;
  readonly deviceStepMsWithTransfers: number | null;
  readonly deviceSlowdown: number | null;
  /** Bytes per direction the busy phases moved, over their wall time (GB/s, 1e9 bytes); 0 for a direction not running. */
  readonly storeGbps: number;
  readonly loadGbps: number;
  /** One contiguous copy per direction in the same run, nothing else running (GB/s): the link's limit. */
  readonly limitGbps: number;
  /** Share of the busy phases' wall time the less busy running copy stream spent copying (device time of its jobs). */
  readonly copyBusyShare: number;
}

export interface OverlapBenchOptions {
  readonly backend: BackendName;
  readonly models: readonly ModelShape[];
  readonly layouts: readonly KvLayout[];
  readonly blockTokens: readonly number[];
  /** One device per method (default ['auto']). */
  readonly copyMethods?: readonly CopyMethod[];
  /** Busy phase kinds, one row each (default all three: both, stores, loads). */
  readonly transfers?: readonly OverlapTransfers[];
  readonly batch: number;
  readonly contextTokens: number;
  /** Default 1 (decode). */
  readonly newTokens?: number;
  /** Timed forwards per mode per round. */
  readonly stepsPerRound: number;
  /** Alternations of the two modes (default 3). */
  readonly rounds?: number;
  /** Bytes per transfer job, rounded down to whole blocks, at least one (default 16 MiB: large enough that the pump refills the queues before they drain). */
  readonly jobBytes?: number;
  /**
   * A CPU tier of this many bytes, pinned in the engine's chunks, each job's
   * CPU blocks drawn at random over it as an engine's tier is used (stores
   * write the first half, loads read the second). Default: two rings of jobs
   * in one chunk, each job's blocks adjacent.
   */
  readonly cpuTierBytes?: number;
  /** The shard of rank 0 of tp (default 1: the whole model). */
  readonly tp?: number;
  readonly deviceIndex?: number;
  /** Faults set on each device after it opens (stress runs: delays, device errors). */
  readonly faults?: DeviceFaults;
  readonly onRow?: (row: OverlapBenchRow) => void;
}

const DEFAULT_JOB_BYTES = 16 * 2 ** 20;
/** Jobs queued per direction during a busy phase. */
const JOBS_PER_QUEUE = 4;
const DIRECTIONS: readonly TransferDirection[] = ['gpuToCpu', 'cpuToGpu'];
const WARMUP_FORWARDS = 3;
/**
 * Bytes of the contiguous copy that measures the link's limit. 64 MiB, as the
 * transfer bench's: on an H100 a 16 MiB copy's fixed costs put its rate at
 * 43.6-54.5 GB/s from one device to the next, below the 53-54 GB/s the jobs
 * themselves reached, which read as copies above 100% of the link.
 */
const LIMIT_COPY_BYTES = 64 * 2 ** 20;

export async function runOverlapBench(options: OverlapBenchOptions): Promise<OverlapBenchRow[]> {
  checkOptions(options);
  const rows: OverlapBenchRow[] = [];
  for (const model of options.models) {
    for (const layout of options.layouts) {
      for (const blockTokens of options.blockTokens) {
        for (const copyMethod of options.copyMethods ?? ['auto']) {
          for (const row of await benchOneDevice(options, model, layout, blockTokens, copyMethod)) {
            rows.push(row);
            options.onRow?.(row);
          }
        }
      }
    }
  }
  return rows;
}

function checkOptions(o: OverlapBenchOptions): void {
  const atLeast = (name: string, value: number | undefined, min: number) => checkIntegerAtLeast('overlap', name, value, min);
  if (o.models.length === 0) throw new ConfigError('overlap bench: models must name at least one model');
  if (o.layouts.length === 0) throw new ConfigError('overlap bench: layouts must name at least one layout');
  if (o.blockTokens.length === 0) throw new ConfigError('overlap bench: blockTokens must list at least one size');
  if (o.copyMethods?.length === 0) throw new ConfigError('overlap bench: copyMethods must name at least one method');
  if (o.transfers?.length === 0) throw new ConfigError('overlap bench: transfers must name at least one of both, stores, loads');
  for (const method of o.copyMethods ?? []) {
    if (!['kernel', 'dma', 'auto'].includes(method)) {
      throw new ConfigError(`overlap bench: copyMethods: '${String(method)}' must be 'kernel', 'dma' or 'auto'`);
    }
  }
  for (const kind of o.transfers ?? []) {
    if (!OVERLAP_TRANSFERS.includes(kind)) {
      throw new ConfigError(`overlap bench: transfers: '${String(kind)}' must be 'both', 'stores' or 'loads'`);
    }
  }
  o.blockTokens.forEach((tokens, i) => atLeast(`blockTokens[${i}]`, tokens, 1));
  atLeast('batch', o.batch, 1);
  atLeast('contextTokens', o.contextTokens, 0);
  atLeast('newTokens', o.newTokens, 1);
  atLeast('stepsPerRound', o.stepsPerRound, 1);
  atLeast('rounds', o.rounds, 1);
  atLeast('jobBytes', o.jobBytes, 1);
  atLeast('tp', o.tp, 1);
  for (const model of o.models) {
    const issue = tpIssue(model, o.tp ?? 1);
    if (issue !== null) throw new ConfigError(`overlap bench: ${describeConfigIssue(issue, objectNaming({ tp: o.tp }))}`);
  }
}

/** Where the bench's blocks live: the forward's tables first, then the blocks stores read and loads write. */
interface BlockRegions {
  readonly blocksPerRequest: number;
  readonly forwardBlocks: number;
  /** Blocks per transfer job. */
  readonly jobBlocks: number;
  /** GPU blocks stores read: [forwardBlocks, forwardBlocks + ring). CPU blocks they write: [0, ring). */
  readonly ring: number;
  /** CPU blocks; when `scattered`, stores write random blocks of [0, cpuBlocks / 2) and loads read [cpuBlocks / 2, cpuBlocks). */
  readonly cpuBlocks: number;
  readonly scattered: boolean;
}

/** The rows of one device: one per busy phase kind, all against the same limit. */
async function benchOneDevice(
  options: OverlapBenchOptions,
  model: ModelShape,
  layout: KvLayout,
  blockTokens: number,
  copyMethod: CopyMethod,
): Promise<OverlapBenchRow[]> {
  const tp = options.tp ?? 1;
  const newTokens = options.newTokens ?? 1;
  const blockBytes = bytesPerGpuBlock(model, tp, blockTokens);
  const blocksPerRequest = Math.ceil((options.contextTokens + newTokens) / blockTokens);
  const forwardBlocks = options.batch * blocksPerRequest;
  const batch = forwardBatch(options.batch, blocksPerRequest, options.contextTokens, newTokens, model.vocabSize);

  const jobBlocks = Math.max(1, Math.floor((options.jobBytes ?? DEFAULT_JOB_BYTES) / blockBytes));
  const ring = jobBlocks * JOBS_PER_QUEUE;
  const tierBlocks = Math.floor((options.cpuTierBytes ?? 0) / blockBytes);
  const scattered = tierBlocks > 2 * ring;
  const regions: BlockRegions = { blocksPerRequest, forwardBlocks, jobBlocks, ring, cpuBlocks: scattered ? tierBlocks : 2 * ring, scattered };
  const device = await openDevice({
    backend: options.backend,
    rank: 0,
    deviceIndex: options.deviceIndex ?? 0,
    geometry: kvGeometry({ model, tp, blockSize: blockTokens, layout }),
    numGpuBlocks: forwardBlocks + 2 * regions.ring,
    numCpuBlocks: regions.cpuBlocks,
    // Two rings: one chunk, so the contiguous copy that measures the limit has room for a whole ring.
    // A scattered tier: the engine's chunks (1 GiB).
    ...(scattered ? {} : { cpuChunkBytes: 2 * regions.ring * blockBytes }),
    copyMethod,
  });
  try {
    if (options.faults) device.setFaults(options.faults);
    const limitGbps = await contiguousLimit(device);
    const forward = new TimedForward(device, batch);
    for (let i = 0; i < WARMUP_FORWARDS; i++) await forward.run();
    const rows: OverlapBenchRow[] = [];
    let nextJobId = 1;
    for (const transfers of options.transfers ?? OVERLAP_TRANSFERS) {
      const directions = DIRECTIONS.filter(
        (d) => transfers === 'both' || (transfers === 'stores') === (d === 'gpuToCpu'),
      );
      const pump = new TransferPump(device, regions, blockBytes, directions, nextJobId);
      const alone: StepTime[] = [];
      const busy: StepTime[] = [];
      const rounds = options.rounds ?? 3;
      for (let round = 0; round < rounds; round++) {
        for (let i = 0; i < options.stepsPerRound; i++) alone.push(await forward.run());
        pump.start();
        for (let i = 0; i < options.stepsPerRound; i++) busy.push(await forward.run());
        await pump.stop();
      }
      nextJobId = pump.nextJobId;
      rows.push(rowOf(options, { model, layout, blockTokens, copyMethod }, transfers, { alone, busy }, pump, limitGbps, regions, blockBytes));
    }
    return rows;
  } finally {
    device.close();
  }
}

/** What one device was opened with. */
interface DeviceShape {
  readonly model: ModelShape;
  readonly layout: KvLayout;
  readonly blockTokens: number;
  readonly copyMethod: CopyMethod;
}

/** One forward's wall time and device time (ms; null where the device does not time forwards). */
interface StepTime {
  readonly wallMs: number;
  readonly deviceMs: number | null;
}

/** Step times of one busy phase kind: forwards alone and forwards beside the copies. */
interface StepTimes {
  readonly alone: readonly StepTime[];
  readonly busy: readonly StepTime[];
}

/** Median device time of the steps, or null if any step was not timed on the device. */
function medianDeviceMs(steps: readonly StepTime[]): number | null {
  const times = steps.map((s) => s.deviceMs);
  return times.every((t): t is number => t !== null) && times.length > 0 ? median(times) : null;
}

function rowOf(
  options: OverlapBenchOptions,
  { model, layout, blockTokens, copyMethod }: DeviceShape,
  transfers: OverlapTransfers,
  { alone, busy }: StepTimes,
  pump: TransferPump,
  limitGbps: number,
  regions: BlockRegions,
  blockBytes: number,
): OverlapBenchRow {
  const newTokens = options.newTokens ?? 1;
  const stepMsAlone = median(alone.map((s) => s.wallMs));
  const stepMsWithTransfers = median(busy.map((s) => s.wallMs));
  const deviceStepMsAlone = medianDeviceMs(alone);
  const deviceStepMsWithTransfers = medianDeviceMs(busy);
  const phaseSeconds = pump.phaseMs / 1000;
  return {
    model: model.name,
    layout,
    blockTokens,
    copyMethod,
    transfers,
    batch: options.batch,
    contextTokens: options.contextTokens,
    cpuTierBytes: regions.cpuBlocks * blockBytes,
    scatteredCpuBlocks: regions.scattered,
    newTokens,
    steps: alone.length,
    stepMsAlone,
    stepMsWithTransfers,
    slowdown: stepMsWithTransfers / stepMsAlone - 1,
    deviceStepMsAlone,
    deviceStepMsWithTransfers,
    deviceSlowdown:
      deviceStepMsAlone !== null && deviceStepMsWithTransfers !== null && deviceStepMsAlone > 0
        ? deviceStepMsWithTransfers / deviceStepMsAlone - 1
        : null,
    storeGbps: pump.bytesMoved.gpuToCpu / phaseSeconds / 1e9,
    loadGbps: pump.bytesMoved.cpuToGpu / phaseSeconds / 1e9,
    limitGbps,
    copyBusyShare: Math.min(...pump.directions.map((d) => pump.busyMs[d])) / pump.phaseMs,
  };
}

/**
 * `batch` requests, request r owning GPU blocks [r * blocksPerRequest, (r + 1) * blocksPerRequest),
 * each computing `newTokens` tokens at positions contextTokens, contextTokens + 1, ... and sampled.
 */
export function forwardBatch(
  batch: number,
  blocksPerRequest: number,
  contextTokens: number,
  newTokens: number,
  vocabSize: number,
): ForwardBatch {
  const blockTableOffsets = new Int32Array(batch + 1);
  const tokenOffsets = new Int32Array(batch + 1);
  const blockTables = new Int32Array(batch * blocksPerRequest);
  const tokens = new Int32Array(batch * newTokens);
  for (let r = 0; r < batch; r++) {
    blockTableOffsets[r + 1] = (r + 1) * blocksPerRequest;
    tokenOffsets[r + 1] = (r + 1) * newTokens;
    for (let b = 0; b < blocksPerRequest; b++) blockTables[r * blocksPerRequest + b] = r * blocksPerRequest + b;
    for (let t = 0; t < newTokens; t++) tokens[r * newTokens + t] = (r * 7919 + t * 104729) % vocabSize;
  }
  return {
    numRequests: batch,
    blockTableOffsets,
    blockTables,
    startPositions: new Int32Array(batch).fill(contextTokens),
    tokenOffsets,
    tokens,
    sample: new Uint8Array(batch).fill(1),
  };
}

/**
 * Runs the same forward again and again, timing each; every run must give
 * the first run's digests, so a transfer that touched the forward's blocks
 * fails the bench instead of skewing it.
 */
class TimedForward {
  private expected: Uint32Array | null = null;

  constructor(
    private readonly device: Device,
    private readonly batch: ForwardBatch,
  ) {}

  /** Wall time of one forward, and its device time where the device gives it (ms). */
  async run(): Promise<StepTime> {
    const started = performance.now();
    const digests = await this.device.forward(this.batch);
    const ms = performance.now() - started;
    const deviceMs = this.device.lastForwardDeviceMs?.() ?? null;
    if (this.expected === null) this.expected = digests;
    else if (digests.some((d, i) => d !== this.expected![i])) {
      throw new DeviceError('overlap bench: a forward gave different digests while transfers ran beside it');
    }
    return { wallMs: ms, deviceMs };
  }
}

/** GB/s of one contiguous copy per direction (the slower direction, each at its best of a few). */
async function contiguousLimit(device: Device): Promise<number> {
  if (!device.timeContiguousCopy) throw new DeviceError('overlap bench: this device cannot time a contiguous copy');
  const bytes = Math.min(device.info.gpuBytes, device.info.cpuBytes, LIMIT_COPY_BYTES);
  const rates: number[] = [];
  for (const direction of ['gpuToCpu', 'cpuToGpu'] as const) {
    await device.timeContiguousCopy(direction, bytes);
    let best = Infinity;
    for (let i = 0; i < 5; i++) best = Math.min(best, await device.timeContiguousCopy(direction, bytes));
    rates.push(bytes / (best * 1e6));
  }
  return Math.min(...rates);
}

/**
 * Keeps both copy streams fed during a busy phase: store jobs read the ring
 * of GPU blocks after the forward's and write CPU blocks [0, ring); load jobs
 * read CPU blocks [ring, 2 * ring) and write the GPU ring after that. Neither
 * waits for compute (the forward never touches their blocks), so they run
 * beside it.
 */
class TransferPump {
  /** In-flight jobs, oldest first. */
  private readonly pending = new Map<number, TransferDirection>();
  private readonly queued: Record<TransferDirection, number> = { gpuToCpu: 0, cpuToGpu: 0 };
  private readonly nextSlot: Record<TransferDirection, number> = { gpuToCpu: 0, cpuToGpu: 0 };
  private running = false;
  private loops: Promise<void>[] = [];
  /** The first job that failed: the loops stop refilling and stop() throws it. */
  private failure: DeviceError | null = null;
  private phaseStart = 0;
  /** Wall time of all busy phases so far (ms). */
  phaseMs = 0;
  readonly bytesMoved: Record<TransferDirection, number> = { gpuToCpu: 0, cpuToGpu: 0 };
  /** Device time of the finished jobs (ms). */
  readonly busyMs: Record<TransferDirection, number> = { gpuToCpu: 0, cpuToGpu: 0 };
  /** xorshift32 state for scattered CPU blocks: the same blocks on every run. */
  private random = 0x9e3779b9;

  constructor(
    private readonly device: Device,
    private readonly regions: BlockRegions,
    private readonly blockBytes: number,
    /** The copy streams this pump keeps busy. */
    readonly directions: readonly TransferDirection[],
    /** Job ids are unique per device: the first one this pump hands out. */
    public nextJobId: number,
  ) {}

  start(): void {
    this.phaseStart = performance.now();
    this.running = true;
    this.loops = this.directions.map((direction) => this.pump(direction));
  }

  /** Stops refilling and waits for the queued jobs; the phase ends when the last one finished. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    await this.device.waitJobs([...this.pending.keys()]);
    this.collect();
    if (this.failure !== null) throw this.failure;
    if (this.pending.size > 0) {
      throw new DeviceError(
        `overlap bench: jobs ${[...this.pending.keys()].join(', ')} finished but are missing from pollFinished()`,
      );
    }
    this.phaseMs += performance.now() - this.phaseStart;
  }

  /** One direction's loop: keep its queue full, and wait for its oldest job before refilling. */
  private async pump(direction: TransferDirection): Promise<void> {
    while (this.running && this.failure === null) {
      while (this.queued[direction] < JOBS_PER_QUEUE) this.submit(direction);
      await this.device.waitJobs([this.oldest(direction)]);
      this.collect();
    }
  }

  private oldest(direction: TransferDirection): number {
    for (const [jobId, d] of this.pending) if (d === direction) return jobId;
    throw new DeviceError(`overlap bench: no ${direction} job in flight`);
  }

  private collect(): void {
    for (const result of this.device.pollFinished()) this.record(result);
  }

  private submit(direction: TransferDirection): void {
    const { forwardBlocks, jobBlocks, ring } = this.regions;
    const slot = this.nextSlot[direction];
    this.nextSlot[direction] = (slot + 1) % JOBS_PER_QUEUE;
    const side = direction === 'gpuToCpu' ? 0 : ring;
    const gpuBlockIds = new Int32Array(jobBlocks);
    const cpuBlockIds = new Int32Array(jobBlocks);
    for (let i = 0; i < jobBlocks; i++) {
      gpuBlockIds[i] = forwardBlocks + side + slot * jobBlocks + i;
      cpuBlockIds[i] = side + slot * jobBlocks + i;
    }
    if (this.regions.scattered) this.scatter(cpuBlockIds, direction);
    const jobId = this.nextJobId++;
    this.device.submitTransfer({ jobId, direction, gpuBlockIds, cpuBlockIds, orderAfterCompute: false });
    this.pending.set(jobId, direction);
    this.queued[direction]++;
  }

  /** Distinct random CPU blocks of the direction's half of the tier (a job never writes one block twice). */
  private scatter(cpuBlockIds: Int32Array, direction: TransferDirection): void {
    const half = Math.floor(this.regions.cpuBlocks / 2);
    const base = direction === 'gpuToCpu' ? 0 : half;
    const taken = new Set<number>();
    for (let i = 0; i < cpuBlockIds.length; i++) {
      let id: number;
      do id = base + (this.nextRandom() % half);
      while (taken.has(id));
      taken.add(id);
      cpuBlockIds[i] = id;
    }
  }

  private nextRandom(): number {
    let x = this.random;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.random = x;
    return x >>> 0;
  }

  /** Records every result, failed ones too, so no completion is dropped behind a failure. */
  private record(result: DeviceJobResult): void {
    const direction = this.pending.get(result.jobId);
    if (direction === undefined) return;
    if (!result.ok && this.failure === null) {
      this.failure = new DeviceError(
        `overlap bench: transfer job ${result.jobId} (${direction}, ${this.regions.jobBlocks} blocks, ` +
          `${this.regions.jobBlocks * this.blockBytes} bytes${result.copyPath ? `, ${result.copyPath}` : ''}) failed on the device: ` +
          `${result.error ?? 'no device error (an injected store or load failure)'}`,
      );
    }
    this.pending.delete(result.jobId);
    this.queued[direction]--;
    this.bytesMoved[direction] += this.regions.jobBlocks * this.blockBytes;
    this.busyMs[direction] += result.elapsedMs;
  }
}
