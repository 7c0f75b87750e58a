import type { EngineConfig } from '../runtime/engine-config.js';
import type { GpuProfileChoice } from '../runtime/gpu-profile-choice.js';

/**
 * The configuration a run resolved to (every default applied), recorded in
 * each report so a report alone says what produced it: model, pools, tiers,
 * policies, the GPU profile and the step clock.
 */
export interface RunConfiguration {
  readonly model: string;
  readonly backend: string;
  readonly tp: number;
  readonly layout: string;
  /** Tokens per GPU block, and GPU blocks per rank. */
  readonly blockSize: number;
  readonly gpuBlocks: number;
  readonly scheduler: {
    readonly maxNumSeqs: number;
    readonly maxNumBatchedTokens: number;
    readonly maxModelLen: number;
    readonly enableChunkedPrefill: boolean;
    readonly enablePrefixCaching: boolean;
  };
  /** The CPU tier; null when off. Its size as given: blocks or bytes (over all ranks). */
  readonly cpuTier: {
    readonly cpuBlocks: number | null;
    readonly cpuBytes: number | null;
    readonly offloadFactor: number;
    readonly eviction: string;
    readonly storePolicy: string;
  } | null;
  /** The remote tier; null without one. Its address with any password masked. */
  readonly remote: { readonly address: string; readonly policy: string; readonly namespace: string; readonly encrypt: boolean } | null;
  /** The GPU profile steps are priced on, where it came from, and the CUDA device's name (null on host). */
  readonly gpuProfile: { readonly name: string; readonly source: string; readonly deviceName: string | null };
  readonly stepClock: string;
  readonly failurePolicy: string;
  readonly rankRestart: boolean;
  readonly faults: string | null;
  readonly copyMethod: string;
}

/** What an engine ran with: its resolved config, its GPU profile choice and how it names its step clock. */
export function runConfiguration(config: EngineConfig, gpu: GpuProfileChoice, stepClock: string): RunConfiguration {
  return {
    model: config.model.name,
    backend: config.backend,
    tp: config.tp,
    layout: config.layout,
    blockSize: config.blockSize,
    gpuBlocks: config.gpuBlocks,
    scheduler: {
      maxNumSeqs: config.maxNumSeqs,
      maxNumBatchedTokens: config.maxNumBatchedTokens,
      maxModelLen: config.maxModelLen,
      enableChunkedPrefill: config.enableChunkedPrefill,
      enablePrefixCaching: config.enablePrefixCaching,
    },
    cpuTier: config.offload
      ? {
          cpuBlocks: config.cpuBlocks ?? null,
          cpuBytes: config.cpuBytes ?? null,
          offloadFactor: config.offloadFactor,
          eviction: config.eviction,
          storePolicy: config.storePolicy,
        }
      : null,
    remote:
      config.remote === null
        ? null
        : { address: config.remote.address.masked, policy: config.remote.policy, namespace: config.remote.namespace, encrypt: config.remote.encrypt },
    gpuProfile: { name: gpu.profile.name, source: gpu.source, deviceName: gpu.deviceName },
    stepClock,
    failurePolicy: config.failurePolicy,
    rankRestart: config.rankRestart,
    // An empty plan injects nothing.
    faults: config.faults ? config.faults : null,
    copyMethod: config.copyMethod,
  };
}

/** The configuration as short text rows (label, value), for the text and HTML reports. */
export function configurationRows(c: RunConfiguration): [string, string][] {
  const cpu = c.cpuTier;
  const cpuSize = cpu === null ? '' : cpu.cpuBlocks !== null ? `${cpu.cpuBlocks} blocks` : `${cpu.cpuBytes ?? 0} bytes`;
  const s = c.scheduler;
  const rows: [string, string][] = [
    ['model', `${c.model}, ${c.backend} backend, tp ${c.tp}, ${c.layout} layout`],
    ['GPU pool', `${c.gpuBlocks} blocks of ${c.blockSize} tokens per rank, prefix caching ${s.enablePrefixCaching ? 'on' : 'off'}`],
    ['CPU tier', cpu === null ? 'off' : `${cpuSize}, offload factor ${cpu.offloadFactor}, eviction ${cpu.eviction}, store policy ${cpu.storePolicy}`],
  ];
  if (c.remote !== null) rows.push(['remote tier', `${c.remote.address}, ${c.remote.policy}, namespace ${c.remote.namespace}${c.remote.encrypt ? ', encrypted' : ''}`]);
  rows.push(
    ['scheduler', `max ${s.maxNumSeqs} seqs, ${s.maxNumBatchedTokens} tokens per step, max model len ${s.maxModelLen}, chunked prefill ${s.enableChunkedPrefill ? 'on' : 'off'}`],
    ['GPU profile', `${c.gpuProfile.name} (${c.gpuProfile.source}${c.gpuProfile.deviceName === null ? '' : `, device ${c.gpuProfile.deviceName}`})`],
    ['failures', `policy ${c.failurePolicy}, rank restart ${c.rankRestart ? 'on' : 'off'}${c.faults === null ? '' : `, faults ${c.faults}`}`],
  );
  return rows;
}
