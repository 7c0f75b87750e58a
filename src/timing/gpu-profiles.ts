/**
 * What a GPU brings to the step clock: dense 16-bit tensor throughput, HBM
 * bandwidth, and the host link the KV tier's copies cross. Figures come from
 * vendor datasheets and from kvtier's own H100 measurements; where each comes
 * from, and which are estimates, is tabulated in docs/architecture.md ("The
 * step clock").
 */

export interface HostLinkProfile {
  /** Bytes per second one direction reaches while the other is idle (pinned, contiguous). */
  readonly oneWayBytesPerSecond: number;
  /** Bytes per second of both directions together while both run. */
  readonly bothWaysBytesPerSecond: number;
  /** Fixed cost of one transfer job (submission, completion event), in microseconds. */
  readonly jobLatencyUs: number;
  /** Cost of each copied region on top of its bytes (descriptor and DMA setup), in nanoseconds. */
  readonly regionOverheadNs: number;
}

export interface GpuProfile {
  readonly name: GpuProfileName;
  /** How reports name it. */
  readonly label: string;
  /** Peak dense BF16/FP16 tensor FLOP/s. */
  readonly peakFlops: number;
  /** Peak HBM (or GDDR) bandwidth in bytes per second. */
  readonly memoryBytesPerSecond: number;
  readonly link: HostLinkProfile;
  /** Whether the link figures were measured on this card (false: derived from the PCIe generation). */
  readonly linkMeasured: boolean;
}

/**
 * How much of the peaks a serving engine reaches, shared by every profile:
 * fitted to vLLM's single-request prefill TTFT of Llama-3.1-8B on an H100
 * (1K to 100K tokens) and to decode reading the weights once per step.
 */
export interface ComputeEfficiency {
  /** Share of peak FLOP/s the dense layers (GEMMs) reach. */
  readonly matmul: number;
  /** Share of peak FLOP/s attention reaches. */
  readonly attention: number;
  /** Share of peak memory bandwidth a step's weight and KV reads reach. */
  readonly memory: number;
  /** Fixed cost of every engine step (launches, sampling, scheduling), in microseconds. */
  readonly stepOverheadUs: number;
}

export const DEFAULT_EFFICIENCY: ComputeEfficiency = {
  matmul: 0.645,
  attention: 0.57,
  memory: 0.8,
  stepOverheadUs: 500,
};

const GB = 1e9;

/**
 * PCIe Gen5 x16 on an H100, as serving engines' transfer jobs see it: 48 GB/s
 * one way, between what vLLM's loads reach for one request (about 43) and in
 * bulk (51); one contiguous copy reaches 55 and both directions 83-91, so two
 * ways at the same share of that is 77.
 */
const PCIE_GEN5_X16: HostLinkProfile = {
  oneWayBytesPerSecond: 48 * GB,
  bothWaysBytesPerSecond: 77 * GB,
  jobLatencyUs: 10,
  regionOverheadNs: 750,
};

/**
 * PCIe Gen4 x16 (31.5 GB/s per direction in theory) at the share of theory
 * Gen5 gives engine jobs on an H100: 48 / 63 one way, 77 / 126 both ways.
 */
const PCIE_GEN4_X16: HostLinkProfile = {
  oneWayBytesPerSecond: 24 * GB,
  bothWaysBytesPerSecond: 38.5 * GB,
  jobLatencyUs: 10,
  regionOverheadNs: 750,
};

export const GPU_PROFILES = {
  'h100-sxm': {
    name: 'h100-sxm',
    label: 'NVIDIA H100 SXM 80GB',
    peakFlops: 989.4e12,
    memoryBytesPerSecond: 3.35e12,
    link: PCIE_GEN5_X16,
    linkMeasured: true,
  },
  h200: {
    name: 'h200',
    label: 'NVIDIA H200 SXM 141GB',
    peakFlops: 989.4e12,
    memoryBytesPerSecond: 4.8e12,
    link: PCIE_GEN5_X16,
    linkMeasured: false,
  },
  'a100-80gb': {
    name: 'a100-80gb',
    label: 'NVIDIA A100 SXM 80GB',
    peakFlops: 312e12,
    memoryBytesPerSecond: 2.039e12,
    link: PCIE_GEN4_X16,
    linkMeasured: false,
  },
  l40s: {
    name: 'l40s',
    label: 'NVIDIA L40S 48GB',
    peakFlops: 362e12,
    memoryBytesPerSecond: 0.864e12,
    link: PCIE_GEN4_X16,
    linkMeasured: false,
  },
  b200: {
    name: 'b200',
    label: 'NVIDIA B200 180GB',
    peakFlops: 2250e12,
    memoryBytesPerSecond: 8e12,
    // Today's x86 hosts offer PCIe Gen5 to the GPU.
    link: PCIE_GEN5_X16,
    linkMeasured: false,
  },
} as const satisfies Record<string, Omit<GpuProfile, 'name'> & { name: string }>;

export type GpuProfileName = keyof typeof GPU_PROFILES;

export const GPU_PROFILE_NAMES = Object.keys(GPU_PROFILES) as [GpuProfileName, ...GpuProfileName[]];

/** The profile a run without a detected GPU predicts for. */
export const DEFAULT_GPU_PROFILE: GpuProfileName = 'h100-sxm';

export function isGpuProfileName(name: string): name is GpuProfileName {
  return Object.prototype.hasOwnProperty.call(GPU_PROFILES, name);
}

export function gpuProfile(name: GpuProfileName): GpuProfile {
  return GPU_PROFILES[name];
}

/**
 * The profile of a CUDA device by its name (as cudaGetDeviceProperties gives
 * it), or null when no profile matches.
 */
export function profileOfDeviceName(deviceName: string): GpuProfileName | null {
  const n = deviceName.toLowerCase();
  if (n.includes('h200')) return 'h200';
  if (n.includes('h100')) return 'h100-sxm';
  if (n.includes('b200')) return 'b200';
  if (n.includes('a100')) return 'a100-80gb';
  if (n.includes('l40s')) return 'l40s';
  return null;
}
