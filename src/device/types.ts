import type { ModelShape } from '../model/shape.js';
import type { HostLinkProfile } from '../timing/gpu-profiles.js';
import type { JobResult, TransferDirection } from '../protocol/step-protocol.js';

/**
 * The JS-facing contract of the native Device (docs/architecture.md, "Device layer"): one per
 * rank, used from that rank's worker thread. `host` is always available;
 * `cuda` only where the addon was built with nvcc and a GPU is present.
 */
export type BackendName = 'host' | 'cuda';

export type { KvLayout } from '../core/kv-geometry.js';
import type { KvGeometry } from '../core/kv-geometry.js';

/**
 * How transfer jobs move blocks on the CUDA backend. `dma`: the copy engines
 * (one cudaMemcpyBatchAsync of the job's regions). `kernel`: a copy kernel of
 * at most 32 CTAs on the copy stream, reading and writing the mapped pinned
 * CPU tier directly; it reaches the link's speed with regions of a few KiB,
 * where DMA does not. `auto` (the default): the kernel for jobs whose regions
 * average under 1 MiB, DMA above. The host backend copies with memcpy
 * whichever is chosen: the option is accepted there so that configurations
 * and commands run unchanged on both.
 */
export type CopyMethod = 'kernel' | 'dma' | 'auto';

export const COPY_METHODS: readonly CopyMethod[] = ['kernel', 'dma', 'auto'];

/**
 * The part of a KvGeometry a device is opened with: the model, tp, tokens
 * per GPU block, GPU blocks per offloaded block and the layout. The device
 * checks them and derives its block sizes itself; a whole KvGeometry is one.
 */
export type DeviceGeometry = Pick<KvGeometry, 'model' | 'tp' | 'blockSize' | 'offloadFactor' | 'layout'>;

export interface DeviceOptions {
  readonly backend: BackendName;
  readonly rank: number;
  /** CUDA device ordinal (ignored by the host backend). */
  readonly deviceIndex: number;
  readonly geometry: DeviceGeometry;
  readonly numGpuBlocks: number;
  /** Offloaded (CPU) blocks; each holds `geometry.offloadFactor` GPU blocks. May be 0. */
  readonly numCpuBlocks: number;
  /** Size of each CPU tier allocation (pinned on CUDA); default 1 GiB. */
  readonly cpuChunkBytes?: number;
  /** Transfer path on the CUDA backend (default `auto`); see CopyMethod. */
  readonly copyMethod?: CopyMethod;
  /**
   * Host backend only: transfer jobs complete no sooner than this link would
   * move their bytes (the copy itself stays a memcpy). Absent: at memcpy speed.
   * The CUDA backend's link is the real one.
   */
  readonly hostLink?: HostLinkProfile;
  /** Called as CPU tier chunks are allocated. */
  readonly onAllocProgress?: (allocatedBytes: number, totalBytes: number) => void;
}

/** What the addon's Device constructor reads: the options with the geometry's fields at the top level. */
export type NativeDeviceOptions = Omit<DeviceOptions, 'geometry'> & DeviceGeometry;

export interface DeviceInfo {
  readonly backend: BackendName;
  /** e.g. "host (x86_64)" or "NVIDIA H100 80GB HBM3". */
  readonly deviceName: string;
  /** Bytes of one GPU block on this rank. */
  readonly bytesPerGpuBlock: number;
  /** Bytes of one CPU (offloaded) block on this rank = offloadFactor * bytesPerGpuBlock. */
  readonly bytesPerCpuBlock: number;
  readonly gpuBytes: number;
  readonly cpuBytes: number;
  readonly cpuChunks: number;
}

export interface TransferSubmission {
  readonly jobId: number;
  readonly direction: TransferDirection;
  readonly gpuBlockIds: ArrayLike<number>;
  readonly cpuBlockIds: ArrayLike<number>;
  /** Loads only: GPU sub-blocks of the first CPU block to skip. */
  readonly firstSubBlock?: number;
  /**
   * Stores only (default true): order the copy after the compute already
   * submitted on the compute stream. false exists for the test that shows why
   * the ordering matters.
   */
  readonly orderAfterCompute?: boolean;
  /** Jobs that must finish before this one starts (stream/event ordering). */
  readonly after?: readonly number[];
}

/**
 * A job's outcome on this device: the step protocol's JobResult for one rank,
 * reported as it is (the worker-side connector passes it on unchanged).
 */
export type DeviceJobResult = JobResult & {
  /**
   * When the job started on the device, in ms of device time since the time
   * origin the device took when it opened (see DeviceSpan); negative or
   * absent: not timed (a job the device could not run, or a device that
   * keeps no time axis).
   */
  readonly startMs?: number;
  /** The host's side of the job (see HostSideTiming); negative or absent: not measured. */
  readonly submitMs?: number;
  readonly enqueueMs?: number;
  /** Why the device could not run the job (ok is then false); absent when it ran. */
  readonly error?: string;
  /**
   * How the bytes moved: 'kernel', 'dma' (one region), 'dma-batch',
   * 'dma-per-region (why the batch was refused)', 'memcpy' (host backend).
   */
  readonly copyPath?: string;
};

/**
 * One forward step, packed. Request i computes tokens
 * tokens[tokenOffsets[i] .. tokenOffsets[i+1]) at positions
 * startPositions[i], startPositions[i]+1, ... through the block table
 * blockTables[blockTableOffsets[i] .. blockTableOffsets[i+1]).
 */
export interface ForwardBatch {
  readonly numRequests: number;
  readonly blockTableOffsets: Int32Array;
  readonly blockTables: Int32Array;
  readonly startPositions: Int32Array;
  readonly tokenOffsets: Int32Array;
  readonly tokens: Int32Array;
  /** 1 where a token is sampled after this step. */
  readonly sample: Uint8Array;
}

/**
 * The host's side of a job or forward beside its device span. `submitMs`:
 * host steady-clock time at which the backend's submit call began, on the
 * axis of `startMs` (host time since the device's time origin completed;
 * CUDA: taken when the open's wait on the origin event returned, so submit
 * times read early by that wake-up, microseconds). `enqueueMs`: host
 * ms the submit spent enqueueing the work's own device work after its start
 * mark (CUDA: from the start event's record to the end event's, which lies
 * inside the device span when the stream was idle; host backend, whose
 * stream takes the start mark itself: what was left of the hand-off of its
 * task to the stream once the task started, usually none). Negative: not
 * measured.
 */
export interface HostSideTiming {
  readonly submitMs: number;
  readonly enqueueMs: number;
}

/**
 * A piece of work as the device timed it. `startMs` is device time since the
 * origin the device took when it opened (CUDA: an event recorded once the
 * device was synchronized at open; host backend: its steady clock at open),
 * so spans of one device share an axis; each device has its own origin.
 * Negative: the start was not timed. CUDA gives event times as float ms, so
 * a start 100 s after the open is good to about 8 us (about 60 us at 1,000 s).
 */
export interface DeviceSpan extends HostSideTiming {
  readonly startMs: number;
  readonly elapsedMs: number;
}

export interface ForwardOptions {
  /** Jobs (loads, fenced stores) the forward must wait for on the device. */
  readonly after?: readonly number[];
  /** Busy time of the emulated compute in ns; absent: the model's computeNsPerToken x tokens / tp. */
  readonly computeNs?: number;
}

/** Fault injection in the transfer path (tests and chaos runs). */
export interface DeviceFaults {
  /** GPU block ids whose loads fail. */
  readonly loadFailBlocks?: readonly number[];
  /** Probability that each loaded GPU block fails. */
  readonly loadFailProbability?: number;
  /** At most this many block load failures from now on (default unlimited). */
  readonly loadFailLimit?: number;
  /** Probability that a store job fails. */
  readonly storeFailProbability?: number;
  /** Delay before every job starts, in ms. */
  readonly delayMs?: number;
  /**
   * Transfers submitted from now on are held back until something needs them,
   * or for `steps` rank steps (src/faults/stalling-device.ts applies it).
   */
  readonly stall?: { readonly steps: number | null };
  /** A further delay per job, uniform in [0, delayJitterMs) ms, drawn from the seed. */
  readonly delayJitterMs?: number;
  /** Probability that a job fails on the device as a whole: its result is not ok and carries an error. */
  readonly jobErrorProbability?: number;
  /** Seed of the fault RNG (deterministic per device). */
  readonly seed?: number;
}

export interface FaultCounters {
  readonly loadBlocksFailed: number;
  readonly storesFailed: number;
  readonly jobsDelayed: number;
  /** Jobs failed on the device by jobErrorProbability (absent where the device has no such fault). */
  readonly jobsFailedOnDevice?: number;
}

export interface Device {
  readonly info: DeviceInfo;
  submitTransfer(job: TransferSubmission): void;
  /** Jobs finished since the last poll, in completion order. */
  pollFinished(): DeviceJobResult[];
  /** Resolves when every listed job has finished (ok or not). */
  waitJobs(jobIds: readonly number[]): Promise<void>;
  /** Number of submitted jobs not yet finished. */
  pendingJobs(): number;
  /** Optional: whether the device holds `jobId` back (the stall fault), so waiting for progress on it is pointless. */
  holds?(jobId: number): boolean;
  /**
   * Runs one step of the reference model; resolves with this rank's digest per
   * request (0 where not sampled). One forward at a time per device: a call
   * while another is still running rejects.
   */
  forward(batch: ForwardBatch, options?: ForwardOptions): Promise<Uint32Array>;
  /**
   * The last forward that succeeded, timed on the device from its start to
   * its end on the compute stream (ms); null before the first. Optional: a
   * device that does not time its forwards leaves it out.
   */
  lastForwardDeviceMs?(): number | null;
  /** The same forward as a span on the device's time axis; null before the first. Optional, as lastForwardDeviceMs. */
  lastForwardDeviceSpan?(): DeviceSpan | null;
  setFaults(faults: DeviceFaults): void;
  faultCounters(): FaultCounters;
  /** Waits until every stream is idle. */
  synchronize(): Promise<void>;
  /** Test and bench access to one block's bytes (synchronous, stream-unordered). */
  readGpuBlock(blockId: number): Buffer;
  writeGpuBlock(blockId: number, data: Uint8Array): void;
  readCpuBlock(blockId: number): Buffer;
  writeCpuBlock(blockId: number, data: Uint8Array): void;
  /**
   * The remote tier's access to a CPU block, one pass each way: copies the
   * block's bytes into target[offset, offset + bytesPerCpuBlock) (a remote
   * value, after its header), or from source[offset, ...) into the block,
   * and returns the CRC-32C of those bytes (src/core/crc32c.ts). Like
   * readCpuBlock, stream-unordered: the caller knows no transfer touches the
   * block meanwhile. A block written from a value whose checksum turns out
   * wrong must not be used.
   */
  readCpuBlockInto(blockId: number, target: Uint8Array, offset?: number): number;
  writeCpuBlockFrom(blockId: number, source: Uint8Array, offset?: number): number;
  /**
   * Bench access: one contiguous copy of `bytes` (at most the smaller of the
   * GPU buffer and the first CPU chunk) on that direction's copy stream;
   * resolves with its duration measured on the stream (ms): the limit block
   * copies are compared to. A store copies the start of the GPU buffer to the
   * start of the CPU tier, a load the end of the first CPU chunk to the end of
   * the GPU buffer, so one of each can run at once on disjoint bytes.
   */
  timeContiguousCopy?(direction: TransferDirection, bytes: number): Promise<number>;
  /**
   * Frees device and host memory and stops the streams; later calls throw
   * "device is closed" (close itself is idempotent).
   */
  close(): void;
}
