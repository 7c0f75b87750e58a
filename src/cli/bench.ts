import { cudaDeviceCount } from '../device/native.js';
import { COPY_METHODS, type BackendName, type CopyMethod, type KvLayout } from '../device/types.js';
import { MODEL_PRESET_NAMES, MODEL_PRESETS, type ModelPresetName } from '../model/presets.js';
import type { EvictionPolicyName } from '../runtime/engine-types.js';
import { describeMachine } from '../bench/machine.js';
import { textTable, writeBenchFiles, type BenchResults, type Column } from '../bench/results.js';
import { runE2eBench, type E2eBenchRow } from '../bench/e2e.js';
import { PUBLISHED_SOURCE, runFidelityBench, type FidelityRow } from '../bench/fidelity.js';
import { GPU_PROFILE_NAMES, type GpuProfileName } from '../timing/gpu-profiles.js';
import { OVERLAP_TRANSFERS, runOverlapBench, type OverlapBenchRow, type OverlapTransfers } from '../bench/overlap.js';
import { runSchedulerBench, type SchedulerBenchRow } from '../bench/scheduler.js';
import { runTransferBench, type TransferBenchRow } from '../bench/transfer.js';
import { runGpuBench, type GpuGoal, type GpuOverlapRow } from '../bench/gpu.js';
import type { RemoteBenchAuth, RemoteBenchRow } from '../bench/remote.js';
import type { ShareBenchRow } from '../bench/share.js';
import type { ServeBenchRow } from '../bench/serve.js';
import { totalmem } from 'node:os';
import { EVICTION_POLICY_NAMES } from '../config/eviction-policy-names.js';
import { ENGINE_DEFAULTS, engineField, engineIntRange } from '../config/engine-schema.js';
import { tpIssue } from '../config/engine-rules.js';
import { BenchHelp, BenchOptions } from './bench-options.js';
import type { LayeredInput } from './config-input.js';
import { formatBytes } from '../core/byte-size.js';
import { checkOutputFile, checkOutputsApart, OutputWriteError } from './output-file.js';
import { UsageError } from './usage-error.js';
import { POOL_DEFAULTS } from '../config/pool-defaults.js';

/**
 * `kvtier bench <kind>`: every bench takes --backend auto|host|cuda,
 * --json FILE and --markdown FILE, prints a table, and reports its figures as
 * ratios against a limit measured in the same run where there is one.
 */

const KINDS = ['transfer', 'overlap', 'scheduler', 'e2e', 'remote', 'share', 'fidelity', 'gpu', 'serve'] as const;

interface BenchSpec<Row> {
  readonly columns: readonly Column<Row>[];
  /** Lines the Markdown report carries; may depend on the backend (what a host figure means). */
  notes(backend: BackendName): readonly string[];
  run(backend: BackendName, options: BenchOptions): Promise<readonly Row[]>;
}

const fixed = (digits: number) => (x: number) => x.toFixed(digits);

const transferBench: BenchSpec<TransferBenchRow> = {
  notes: (backend) => [
    'gbps: blocks moved between the GPU KV cache and the CPU tier by transfer jobs; limitGbps: one contiguous copy of the same bytes in the same run; ratio = gbps / limitGbps.',
    'tp: the shard of rank 0 of that many ranks; regionKiB: one block\'s region (the whole block cross-layer, one layer\'s part per-layer), the unit the copies coalesce.',
    backend === 'host'
      ? 'Host backend: every copy method is the same memcpy (copyMethod only matters on CUDA), so rows differing only in it measure the same thing.'
      : 'CUDA backend: copyMethod dma = cudaMemcpyBatchAsync on the copy engines, kernel = a copy kernel of at most 12 CTAs over the mapped pinned CPU tier, auto = DMA for jobs whose regions average 256 KiB or more and on a device that runs forwards, else the kernel.',
  ],
  columns: [
    { header: 'model', cell: (r) => r.model },
    { header: 'tp', cell: (r) => String(r.tp) },
    { header: 'layout', cell: (r) => r.layout },
    { header: 'blockTokens', cell: (r) => String(r.blockTokens) },
    { header: 'regionKiB', cell: (r) => fixed(1)(r.regionBytes / 1024) },
    { header: 'copyMethod', cell: (r) => r.copyMethod },
    { header: 'direction', cell: (r) => r.direction },
    { header: 'blocks', cell: (r) => String(r.blocks) },
    { header: 'MiB', cell: (r) => fixed(1)(r.bytes / 2 ** 20) },
    { header: 'gbps', cell: (r) => fixed(2)(r.gbps) },
    { header: 'limitGbps', cell: (r) => fixed(2)(r.limitGbps) },
    { header: 'ratio', cell: (r) => fixed(3)(r.ratio) },
  ],
  async run(backend, options) {
    const models = options.list<ModelPresetName>('models', MODEL_PRESET_NAMES, ['tiny', 'llama-8b']);
    const layouts = options.list<KvLayout>('layouts', ['cross-layer', 'per-layer'], ['cross-layer', 'per-layer']);
    const blockTokens = options.intList('blockTokens', [16, 32, 64, 128, 256], engineIntRange('blockSize').max);
    const totalBytes = options.bytes('totalBytes', 64 * 2 ** 20);
    const repeats = options.int('repeats', 5);
    const tps = options.intList('tp', [1], engineIntRange('tp').max);
    const copyMethods = options.list<CopyMethod>('copyMethod', COPY_METHODS, ['auto']);
    options.finish();
    for (const tp of tps) checkTpSplitsHeads(options, tp, models);
    // Each side holds two pools of totalBytes (a store and a load at once); on the host backend both sides are host memory.
    const hostBytes = (backend === 'host' ? 4 : 2) * totalBytes;
    if (hostBytes > totalmem()) {
      throw options.invalid('totalBytes', `the bench needs ${formatBytes(hostBytes)} of host memory but this machine has ${formatBytes(totalmem())}`);
    }
    return runTransferBench({
      backend,
      models: models.map((m) => MODEL_PRESETS[m]),
      layouts,
      blockTokens,
      totalBytes,
      repeats,
      tps,
      copyMethods,
      onRow: (row) =>
        process.stderr.write(
          `  ${row.model} tp${row.tp} ${row.layout} ${row.blockTokens} ${row.copyMethod} ${row.direction}: ` +
            `${row.gbps.toFixed(2)} GB/s (${(100 * row.ratio).toFixed(0)}% of the contiguous copy)\n`,
        ),
    });
  },
};

const schedulerBench: BenchSpec<SchedulerBenchRow> = {
  notes: () => [
    'usPerStep: CPU microseconds (user + system, the whole process: GC and JIT threads included) of Scheduler.schedule() + updateFromOutput() per decode step, with that many running requests; no model work is timed. With offload on, the connector (store-on-compute, --eviction lru by default) runs inside both calls.',
    'Each row is the median (by usPerStep) of --repeats measurements on fresh schedulers, after one untimed run that warms up the JIT.',
    'Every request decodes in lockstep, so all of them complete a block (hash, prefix-cache insert, one store job each) in the same step once every blockSize steps: p99WallUs is that step.',
    'allocBPerReq: heap bytes that schedule() + updateFromOutput() allocate per request in a decode step that completes no block, read from V8\'s heap statistics around each call over 64 untimed steps after the timed ones (median; steps with a garbage collection left out).',
    'metrics on (--with-metrics): the engine monitor observes the scheduler and every step as Engine.step() does, and a Prometheus registry over it is scraped every --scrape-every steps with metrics (its CPU time counts). On one scheduler the timed steps alternate blocks of 2 x blockSize steps without and with the metrics (--steps of each), so a busy machine slows both alike; metricsOverhead = usPerStep(on) / usPerStep(off) - 1, and the row is the median run by it. monitoringUs: wall microseconds per step inside the monitoring calls themselves (hooks and scrapes); monitoringShare = monitoringUs / usPerStep(off).',
  ],
  columns: [
    { header: 'runningRequests', cell: (r) => String(r.runningRequests) },
    { header: 'offload', cell: (r) => (r.withConnector ? 'on' : 'off') },
    { header: 'metrics', cell: (r) => (r.withMetrics ? 'on' : 'off') },
    { header: 'usPerStep', cell: (r) => fixed(1)(r.usPerStep) },
    { header: 'usPerRequestStep', cell: (r) => fixed(3)(r.usPerRequestStep) },
    { header: 'wallUsPerStep', cell: (r) => fixed(1)(r.wallUsPerStep) },
    { header: 'p99WallUs', cell: (r) => fixed(1)(r.p99WallUsPerStep) },
    { header: 'scheduleShare', cell: (r) => fixed(2)(r.scheduleShare) },
    { header: 'metricsOverhead', cell: (r) => (r.metricsOverhead === null ? '-' : `${(100 * r.metricsOverhead).toFixed(1)}%`) },
    { header: 'monitoringUs', cell: (r) => (r.monitoringUsPerStep === null ? '-' : fixed(1)(r.monitoringUsPerStep)) },
    { header: 'monitoringShare', cell: (r) => (r.monitoringShare === null ? '-' : `${(100 * r.monitoringShare).toFixed(1)}%`) },
    { header: 'allocBPerReq', cell: (r) => (r.allocBytesPerRequestStep === null ? '-' : fixed(1)(r.allocBytesPerRequestStep)) },
  ],
  async run(_backend, options) {
    const runningRequests = options.intList('running', [256, 1024, 4096]);
    const steps = options.int('steps', 500);
    const repeats = options.int('repeats', 3);
    const offload = options.flag('offload', true);
    const promptTokens = options.int('promptTokens', 128);
    const withMetrics = options.flag('withMetrics', false);
    const scrapeEverySteps = options.int('scrapeEvery', 1000);
    const eviction = options.oneOf<EvictionPolicyName>('eviction', EVICTION_POLICY_NAMES, 'lru');
    // 0 (default): a multiple of the GPU pool the bench never fills; a smaller tier makes stores evict.
    const cpuBlocks = options.engineInt('cpuBlocks', 'cpuBlocks', 0);
    options.finish();
    return runSchedulerBench({
      runningRequests,
      steps,
      repeats,
      promptTokens,
      withMetrics,
      scrapeEverySteps,
      cpuTier: offload
        ? (config) => ({ cpuBlocks: cpuBlocks === 0 ? config.numGpuBlocks * POOL_DEFAULTS.benchSchedulerCpuPerGpuBlock : cpuBlocks, eviction, storePolicy: 'on-compute' })
        : undefined,
    });
  },
};

const overlapBench: BenchSpec<OverlapBenchRow> = {
  notes: (backend) => [
    'stepMsAlone / stepMsWithTransfers: median wall time of one forward step (a batch of requests each computing newTokens tokens after contextTokens cached ones, reading all of them), alone and while stores and loads of other blocks run on both copy streams; slowdown = stepMsWithTransfers / stepMsAlone - 1. Alone and busy phases alternate in the same run on the same device. deviceSlowdown: the same from the forwards\' device times (start to end on the compute stream, no wake-up of the JS thread in it).',
    'storeGbps / loadGbps: bytes the copies moved per direction during the busy phases over their wall time; limitGbps: one contiguous 64 MiB copy per direction in the same run (the slower direction); copyBusyShare: share of the busy phases the less busy running copy stream spent copying.',
    'transfers: both = stores and loads at once, stores / loads = one direction only; copyMethod: the device\'s transfer path (one device each). cpuTier: the CPU tier\'s size; "scattered" when --cpu-tier-bytes made it larger than two rings of jobs and each job\'s CPU blocks were drawn at random over it (stores into its first half, loads from its second), as an engine uses its tier.',
    backend === 'host'
      ? 'Host backend: the "GPU" is host memory, the copy streams are memcpy threads and the compute stream is a thread that sleeps for the emulated compute and then computes the reference model on the CPU. The slowdown here is CPU-core and memory-bandwidth contention between those threads on this machine, not what a GPU sees; the goal (slowdown <= 3% with copies on the copy engines) can only be checked with --backend cuda.'
      : 'CUDA backend: the forward reads its inputs from and writes its digests to mapped pinned memory (no copy engine) on the highest-priority stream, its emulated compute occupying every SM; copies run on low-priority streams, one per direction, on the copy engines (dma) or as a copy kernel of at most 12 CTAs (kernel). The goal is slowdown <= 3% with stores and loads at >= 80% of limitGbps.',
  ],
  columns: [
    { header: 'model', cell: (r) => r.model },
    { header: 'layout', cell: (r) => r.layout },
    { header: 'blockTokens', cell: (r) => String(r.blockTokens) },
    { header: 'copyMethod', cell: (r) => r.copyMethod },
    { header: 'transfers', cell: (r) => r.transfers },
    { header: 'batch', cell: (r) => String(r.batch) },
    { header: 'context', cell: (r) => String(r.contextTokens) },
    { header: 'newTokens', cell: (r) => String(r.newTokens) },
    { header: 'cpuTier', cell: (r) => `${formatBytes(r.cpuTierBytes)}${r.scatteredCpuBlocks ? ' scattered' : ''}` },
    { header: 'stepMsAlone', cell: (r) => fixed(3)(r.stepMsAlone) },
    { header: 'stepMsWithTransfers', cell: (r) => fixed(3)(r.stepMsWithTransfers) },
    { header: 'slowdown', cell: (r) => `${(100 * r.slowdown).toFixed(1)}%` },
    { header: 'deviceSlowdown', cell: (r) => (r.deviceSlowdown === null ? '-' : `${(100 * r.deviceSlowdown).toFixed(1)}%`) },
    { header: 'storeGbps', cell: (r) => fixed(2)(r.storeGbps) },
    { header: 'loadGbps', cell: (r) => fixed(2)(r.loadGbps) },
    { header: 'limitGbps', cell: (r) => fixed(2)(r.limitGbps) },
    { header: 'copyBusyShare', cell: (r) => fixed(2)(r.copyBusyShare) },
  ],
  async run(backend, options) {
    const models = options.list<ModelPresetName>('models', MODEL_PRESET_NAMES, ['small', 'llama-8b']);
    const layouts = options.list<KvLayout>('layouts', ['cross-layer', 'per-layer'], ['cross-layer', 'per-layer']);
    const blockTokens = options.intList('blockTokens', [16], engineIntRange('blockSize').max);
    const batch = options.int('batch', 16);
    const contextTokens = options.int('contextTokens', 256, 0);
    const newTokens = options.int('newTokens', 1);
    const stepsPerRound = options.int('steps', 10);
    const rounds = options.int('rounds', 3);
    const jobBytes = options.bytes('jobBytes', 16 * 2 ** 20);
    const cpuTierBytes = options.bytes('cpuTierBytes', 0);
    const tp = options.engineInt('tp', 'tp', 1);
    const copyMethods = options.list<CopyMethod>('copyMethod', COPY_METHODS, ['auto']);
    const transfers = options.list<OverlapTransfers>('transfers', OVERLAP_TRANSFERS, OVERLAP_TRANSFERS);
    options.finish();
    checkTpSplitsHeads(options, tp, models);
    return runOverlapBench({
      backend,
      models: models.map((m) => MODEL_PRESETS[m]),
      layouts,
      blockTokens,
      batch,
      contextTokens,
      newTokens,
      stepsPerRound,
      rounds,
      jobBytes,
      cpuTierBytes,
      tp,
      copyMethods,
      transfers,
      onRow: (row) =>
        process.stderr.write(
          `  ${row.model} ${row.layout} ${row.blockTokens} ${row.copyMethod} ${row.transfers}: ${row.stepMsAlone.toFixed(2)} ms alone, ` +
            `${row.stepMsWithTransfers.toFixed(2)} ms with transfers (${(100 * row.slowdown).toFixed(1)}%)\n`,
        ),
    });
  },
};

const ms = (x: number | null) => (x === null ? '-' : x.toFixed(1));

/** What --url of the remote benches takes (without it, they start a private redis-server). */
const REMOTE_URL_HELP = 'redis://[user:pass@]host:port or rediss://...; default: a private redis-server';

/** The value protections `bench remote --auth` measures (default: all of them, in one run). */
const REMOTE_BENCH_AUTH: readonly RemoteBenchAuth[] = ['none', 'mac', 'encrypt'];

const remoteBench: BenchSpec<RemoteBenchRow> = {
  notes: () => [
    'gbps: payload bytes of one rank\'s shards moved through the remote tier (write: CPU-tier block copied into its value with its CRC-32C in one pass, header, SET, sent as soon as about 1 MiB is encoded: a large value as a command of its own, small ones in one pipeline; read: about 1 MiB of values per MGET (a GET for a large value), auto-pipelined, the headers of each reply checked and payloads copied into the CPU-tier blocks with their checksums checked in the same pass), jobs of jobBlocks blocks issued at once, over wall time.',
    'limitGbps: plain SET (write) or GET (read) of values of the same size (payload + 68-byte header) through the same client (iovalkey, auto-pipelined), all issued at once, on the same server in the same run; ratio = gbps / limitGbps. Best of the repeats on both sides.',
    'auth: how values are protected, with a secret drawn for the run: none (CRC-32C only), mac (HMAC-SHA-256 over key, header and payload), encrypt (AES-256-GCM); every protection is measured in each repeat, in turn.',
    'Server: a private redis-server on a loopback port unless --url names one.',
  ],
  columns: [
    { header: 'model', cell: (r) => r.model },
    { header: 'blockTokens', cell: (r) => String(r.blockTokens) },
    { header: 'valueKiB', cell: (r) => fixed(1)(r.valueKiB) },
    { header: 'auth', cell: (r) => r.auth },
    { header: 'op', cell: (r) => r.op },
    { header: 'blocks', cell: (r) => String(r.blocks) },
    { header: 'MiB', cell: (r) => fixed(1)(r.bytes / 2 ** 20) },
    { header: 'gbps', cell: (r) => fixed(3)(r.gbps) },
    { header: 'limitGbps', cell: (r) => fixed(3)(r.limitGbps) },
    { header: 'ratio', cell: (r) => fixed(3)(r.ratio) },
  ],
  async run(backend, options) {
    const url = options.optionalString('url', REMOTE_URL_HELP);
    const models = options.list<ModelPresetName>('models', MODEL_PRESET_NAMES, ['tiny', 'llama-8b']);
    const blockTokens = options.intList('blockTokens', [16]);
    const totalBytes = options.bytes('totalBytes', 64 * 2 ** 20);
    const jobBlocks = options.int('jobBlocks', 8);
    const repeats = options.int('repeats', 3);
    const auth = options.list<RemoteBenchAuth>('auth', REMOTE_BENCH_AUTH, REMOTE_BENCH_AUTH);
    options.finish();
    const { runRemoteBench } = await import('../bench/remote.js');
    return runRemoteBench({ backend, url, models: models.map((m) => MODEL_PRESETS[m]), blockTokens, totalBytes, jobBlocks, repeats, auth });
  },
};

const shareBench: BenchSpec<ShareBenchRow> = {
  notes: () => [
    'Two engines share one remote tier (write-through): the first replays the first half of the trace slice, the second (its own empty CPU tier) the second half. Limit, same run: one engine with a CPU tier that never evicts replays the whole slice; its hits on the same second-half requests.',
    'ratio = the second engine\'s remote hit tokens / the single engine\'s CPU-tier hit tokens on those requests. Both count per request, at its admission: remoteHit = tokens a request hit in CPU-tier blocks the remote filled (by its own fetch or an earlier request\'s); fetched = tokens the fetches read, a block once however many requests hit it. Requests are submitted all at once (no arrivals). Every finished request is checked against the reference model (verified).',
    'The engines run one after another in one process, each with its own rank threads and connections: they share nothing but the server.',
  ],
  columns: [
    { header: 'run', cell: (r) => r.run },
    { header: 'requests', cell: (r) => String(r.requests) },
    { header: 'cpuBlocks', cell: (r) => String(r.cpuBlocks) },
    { header: 'prompt', cell: (r) => String(r.promptTokens) },
    { header: 'gpuHit', cell: (r) => String(r.gpuHitTokens) },
    { header: 'cpuHit', cell: (r) => String(r.cpuHitTokens) },
    { header: 'remoteHit', cell: (r) => (r.remoteHitTokens === null ? '-' : String(r.remoteHitTokens)) },
    { header: 'fetched', cell: (r) => (r.fetchedTokens === null ? '-' : String(r.fetchedTokens)) },
    { header: 'ratio', cell: (r) => (r.ratio === null ? '-' : fixed(3)(r.ratio)) },
    { header: 'verified', cell: (r) => `${r.verified - r.mismatches}/${r.verified}` },
  ],
  async run(backend, options) {
    const trace = options.optionalString('trace');
    const url = options.optionalString('url', REMOTE_URL_HELP);
    const model = options.oneOf<ModelPresetName>('model', MODEL_PRESET_NAMES, 'tiny');
    const config = {
      backend,
      traceFile: trace ?? '',
      url,
      maxRequests: options.int('maxRequests', 400),
      tokenScale: options.int('tokenScale', 32),
      model,
      tp: options.engineInt('tp', 'tp', defaultTp(backend, MODEL_PRESETS[model].kvHeads)),
      blockSize: options.engineInt('blockSize', 'blockSize', ENGINE_DEFAULTS.blockSize),
      gpuBlocks: options.engineInt('gpuBlocks', 'gpuBlocks', POOL_DEFAULTS.benchShare.gpuBlocks),
      cpuBlocks: Math.max(1, options.engineInt('cpuBlocks', 'cpuBlocks', POOL_DEFAULTS.benchShare.cpuBlocks)),
      timeoutMs: options.engineInt('timeoutMs', 'remoteTimeoutMs', ENGINE_DEFAULTS.remoteTimeoutMs),
    };
    options.finish();
    if (trace === null) throw new UsageError('bench share: --trace FILE is required (a Mooncake trace, e.g. conversation_trace.jsonl)');
    checkTpSplitsHeads(options, config.tp, [model]);
    const { runShareBench } = await import('../bench/share.js');
    return runShareBench(config);
  },
};

/** --gpu of a bench that runs the engine: a profile, or 'auto' (the CUDA device's own, else h100-sxm). */
function gpuOption(options: BenchOptions): GpuProfileName | undefined {
  const gpu = options.oneOf<GpuProfileName | 'auto'>('gpu', [...GPU_PROFILE_NAMES, 'auto'], 'auto');
  return gpu === 'auto' ? undefined : gpu;
}

const fidelityBench: BenchSpec<FidelityRow> = {
  notes: () => [
    `published: ${PUBLISHED_SOURCE}.`,
    'predicted: the same experiment as a simulated replay on the step clock (llama-8b on --gpu, tp 1, block size 16, GPU prefix caching off) through the production scheduler, offloading connector and rank workers; TTFT rows compare compute / load-from-CPU for one request, throughput rows the prompt tokens/s at a CPU hit rate over the same at 0%.',
    'error = predicted / published - 1. The machine running the bench does not matter: the replay\'s clock is modelled.',
  ],
  columns: [
    { header: 'figure', cell: (r) => r.figure },
    { header: 'predicted', cell: (r) => `${fixed(2)(r.predicted)}x` },
    { header: 'published', cell: (r) => `${fixed(2)(r.published)}x` },
    { header: 'error', cell: (r) => `${r.error >= 0 ? '+' : ''}${fixed(1)(100 * r.error)}%` },
    { header: 'detail', cell: (r) => r.detail },
  ],
  async run(_backend, options) {
    const gpu = options.oneOf<GpuProfileName>('gpu', GPU_PROFILE_NAMES, 'h100-sxm');
    const throughputRequests = options.int('requests', 1000);
    const maxNumBatchedTokens = options.int('maxBatchedTokens', 8192);
    options.finish();
    return runFidelityBench({ gpu, throughputRequests, maxNumBatchedTokens });
  },
};

const e2eBench: BenchSpec<E2eBenchRow> = {
  notes: (backend) => [
    'One slice of a Mooncake trace through the Engine twice, offload off then on, fed by arrival (timestamps / speedup, open loop, as kvtier run --trace). prefill: prompt tokens the ranks computed; gpuHit / cpuHit: prompt tokens served by the GPU prefix cache / loaded from the CPU tier.',
    'gpuCpuOptimalHit: the GPU+CPU optimum of kvtier analyze at the same CPU capacity, block size, offload factor and token scale: Belady MIN hit tokens of one cache with no GPU tier in front (transfers instant), so GPU prefix and CPU-tier hits together; ofGpuCpuOpt = (gpuHit + cpuHit) / gpuCpuOptimalHit. It is not a bound of the CPU tier alone: kvtier sweep and kvtier analyze --gpu-blocks give that.',
    'Every finished request is checked against the reference model (verified).',
    backend === 'host'
      ? 'Host backend: compute is emulated (the model preset\'s ns per token, split over the ranks) and copies are memcpy, so TTFT and throughput show the scheduling and the prefill saved, not a GPU\'s speed.'
      : 'CUDA backend.',
  ],
  columns: [
    { header: 'offload', cell: (r) => (r.offload ? 'on' : 'off') },
    { header: 'requests', cell: (r) => `${r.finished}/${r.requests}` },
    { header: 'prompt', cell: (r) => String(r.promptTokens) },
    { header: 'prefill', cell: (r) => String(r.prefillTokensComputed) },
    { header: 'gpuHit', cell: (r) => String(r.gpuPrefixHitTokens) },
    { header: 'cpuHit', cell: (r) => String(r.cpuHitTokens) },
    { header: 'gpuCpuOptimalHit', cell: (r) => String(r.gpuCpuOptimalHitTokens) },
    { header: 'ofGpuCpuOpt', cell: (r) => `${(100 * r.hitShareOfGpuCpuOptimal).toFixed(1)}%` },
    { header: 'ttftP50Ms', cell: (r) => ms(r.ttftP50Ms) },
    { header: 'ttftP99Ms', cell: (r) => ms(r.ttftP99Ms) },
    { header: 'outTok/s', cell: (r) => fixed(0)(r.outputTokensPerSecond) },
    { header: 'req/s', cell: (r) => fixed(2)(r.requestsPerSecond) },
    { header: 'preempt', cell: (r) => String(r.preemptions) },
    { header: 'verified', cell: (r) => (r.verified === null ? '-' : `${r.verified - (r.mismatches ?? 0)}/${r.verified}`) },
    { header: 'stepClock', cell: (r) => r.stepClock },
  ],
  async run(backend, options) {
    const trace = options.optionalString('trace');
    const arrivals = options.flag('arrivals', true);
    options.forbid('speedup', !arrivals, 'and --arrivals false do not go together: without arrivals there is nothing to speed up');
    const speedup = arrivals ? options.positiveNumber('speedup', 30) : undefined;
    const model = options.oneOf<ModelPresetName>('model', MODEL_PRESET_NAMES, 'tiny');
    const config = {
      backend,
      traceFile: trace ?? '',
      maxRequests: options.int('maxRequests', 1000),
      tokenScale: options.int('tokenScale', 32),
      arrivals,
      speedup,
      model,
      tp: options.engineInt('tp', 'tp', defaultTp(backend, MODEL_PRESETS[model].kvHeads)),
      layout: options.oneOf<KvLayout>('layout', engineField('layout').options, ENGINE_DEFAULTS.layout),
      blockSize: options.engineInt('blockSize', 'blockSize', ENGINE_DEFAULTS.blockSize),
      gpuBlocks: options.engineInt('gpuBlocks', 'gpuBlocks', POOL_DEFAULTS.benchE2e.gpuBlocks),
      // At least one block: the bench's second run is the one with a CPU tier.
      cpuBlocks: options.int('cpuBlocks', POOL_DEFAULTS.benchE2e.cpuBlocks, 1, engineIntRange('cpuBlocks').max),
      offloadFactor: options.engineInt('offloadFactor', 'offloadFactor', ENGINE_DEFAULTS.offloadFactor),
      eviction: options.oneOf<EvictionPolicyName>('eviction', EVICTION_POLICY_NAMES, 'lru'),
      gpu: gpuOption(options),
      verify: options.flag('verify', true),
    };
    options.finish();
    if (trace === null) throw new UsageError('bench e2e: --trace FILE is required (a Mooncake trace, e.g. conversation_trace.jsonl)');
    checkTpSplitsHeads(options, config.tp, [model]);
    return runE2eBench({
      ...config,
      onRow: (row) =>
        process.stderr.write(
          `  offload ${row.offload ? 'on' : 'off'}: ${row.prefillTokensComputed} prefill tokens, ${row.cpuHitTokens} CPU hits, ` +
            `TTFT p50 ${ms(row.ttftP50Ms)} ms, ${row.wallSeconds.toFixed(1)} s\n`,
        ),
    });
  },
};

const percent = (x: number | null) => (x === null ? '-' : `${(100 * x).toFixed(1)}%`);
const orDash = (digits: number) => (x: number | null) => (x === null ? '-' : x.toFixed(digits));

const serveBench: BenchSpec<ServeBenchRow> = {
  notes: (backend) => [
    '`kvtier serve` (tiny model) in the bench process; the load comes from autocannon in a child process, so its CPU time and heap are not the server\'s.',
    'fixed rate: completions (a shared system prompt and a distinct user turn, --max-tokens each, whole responses) at --rate per second for --duration seconds over --connections connections, to the HTTP server on its front-end thread (kvtier serve\'s default); p50Ms / p99Ms: autocannon\'s latency to the last byte; errors: non-2xx, socket errors and timeouts; heapBeforeMiB / heapAfterMiB: the server process\'s used heap after a full garbage collection, before and after the phase; gpuHit / cpuHit: prompt tokens served by the GPU prefix cache and the CPU tier.',
    'overhead: --streams requests at once (distinct prompts of --prompt-tokens, --stream-tokens output tokens each), on one engine, served in turn, --repeats times, the order turned by one phase each repeat (rows are medians): by the bare engine (added and stepped with nothing reading the tokens), through the library (ServingEngine.stream read by for-await, no HTTP), over HTTP with the server on the main thread beside the scheduler (--http-thread off: http sse, one event per token; http sse xN, one per --stream-interval N tokens; http whole, whole responses), and over HTTP with the server on its front-end thread (thread sse, thread sse xN, thread whole: tokens reach it through a shared ring written once per step). cpuUsPerStep: this process\'s CPU time (user + system, every thread: ranks and front-end thread included) over the engine steps the batch took; threadUsPerStep: the main (scheduler) thread\'s CPU time per step (Linux /proc/thread-self/schedstat). addedUsPerStep = the median over the repeats of a batch\'s main-thread CPU per step minus the library batch\'s of the same repeat (negative: cheaper than a for-await reader per request); addedVsBareUsPerStep: the same minus the bare engine\'s, the more demanding baseline (the process\'s CPU where the thread\'s cannot be read). Accounting starts once the load generator has started and read its requests. schedulerUsPerStep: Scheduler.schedule() + updateFromOutput() CPU time per decode step at --streams running requests with the CPU tier, measured in the same run as kvtier bench scheduler does; overheadShare = addedUsPerStep / schedulerUsPerStep; bareShare = addedVsBareUsPerStep / schedulerUsPerStep (the goal: at most 10% at 256 streams). frontendUsPerStep: the front-end thread\'s own CPU time per step (/proc/self/task/<tid>/schedstat): the HTTP work moved off the scheduler\'s thread, it did not vanish. arrivalUsPerRequest: the main thread\'s time receiving one completion from the front-end thread and queueing it. addedUsPerEvent = addedUsPerStep x steps / the events the batch sent (sse: one per token per stream; xN: one per N tokens; whole: one response per request).',
    'ring delivery: the main thread\'s per-step part of the front-end thread\'s path alone, timed in a tight loop away from the engine (wall time, median of 60 rounds of 200 steps after 15 warm-up rounds, so most rounds run unpreempted on a shared machine): per step, --streams requests each given one token as the serving loop delivers them to requests submitted with a step sink (the token ring\'s writer opened once, each request\'s ticket and its one token, as a number, carried on its step update, the scheduler\'s own kind of update, no lookup by id, and the token handed over by slot: a two-word record) and the step closed with one publish (Atomics.store + Atomics.notify); the batches\' accounting cannot resolve a few microseconds per step beside the engine\'s own. addedUsPerEvent: per token.',
    'arrival intake: the main thread\'s per-request part alone, timed the same way on the server\'s engine (median of 60 rounds after 15 warm-up rounds): 4 completions written to the arrival ring (the front end\'s work, not timed), then one step boundary\'s poll that reads them, queues each on the ServingEngine and answers in the token ring (the answer is published with the next step\'s tokens, the serving loop stepping next, rather than on its own); in the same rounds, in turn first or second, a library caller\'s ServingEngine.stream of 4 such requests (all aborted before any step takes them). arrivalUsPerRequest: the poll per completion; addedUsPerEvent: that minus stream() per completion; addedUsPerStep: addedUsPerEvent x the arrivals per step at the overhead batches\' steady rate (--streams / --stream-tokens: each request runs --stream-tokens steps); addedVsBareUsPerStep: the whole poll per step, stream() included.',
    'delivery + intake: ring delivery + arrival intake, the main thread\'s whole share of the front-end thread\'s path per step, each measured alone as kvtier bench scheduler measures the scheduler.',
    'kv events: the engine thread\'s part of publishing KV events (kvtier serve --kv-events-endpoint), timed alone the same way (median of 40 rounds of 100 steps after 10 warm-up rounds): a saturated decode step at --streams requests, one block in 16 filling per request, so streams / 16 blocks stored on the GPU (with parent and tokens; each handed over as a run of its request\'s block table, by range, as the GPU pool does) and on the CPU tier (under the same key), and as many removed from each, every removal its own event; what stays on the engine\'s thread: the tiers\' reports written as integer records (block hashes as two 32-bit words, tokens, block size) into the KV event thread\'s shared ring, and one publish per step (Atomics.store, and an Atomics.notify only when the KV event thread sleeps); every hash is made by the block hasher before the timed rounds, as an engine makes its hashes, and each tier keeps its cached blocks\' hash values beside them as the two words an event carries (the GPU pool by block id, the CPU tier by slot, set from the lanes their tables keyed the hash on), so in the timed steps a report hands the words over as the tiers do (a stored run\'s words, its parent\'s first, copied from the pool\'s by block id, the parent confirmed as the block cached under its hash; a CPU store\'s from the tier\'s by slot; a removal its block\'s) and no hash text is read. The KV event thread builds the batch, encodes it and hands it to a ZeroMQ PUB socket on loopback with its replay buffer, beside it (it catches up between rounds; while steps come it reads every 5 ms, its default batch window, rather than being woken per step); frontendUsPerStep in this row: that thread\'s CPU time per step over the timed rounds (/proc/self/task/<tid>/schedstat), the work moved off the engine\'s thread. addedUsPerEvent: per event.',
    'http + kv events: delivery + intake + kv events, the whole serving path\'s share of the engine\'s thread per step (overheadShare: the goal, at most 10% at 256 streams).',
    'socket floor (in each repeat, the engine idle): one bare socket.write of a one-token event\'s bytes (chunk-framed, as the server sends it) to each of --streams loopback connections read by a child process, --stream-tokens rounds spaced by 2 ms; addedUsPerStep: the main thread\'s CPU time per round (what one event per stream per step costs at the least), addedUsPerEvent: per write; vsFloor = a row\'s addedUsPerEvent / the floor\'s per write. requests 0/0: no HTTP requests.',
    backend === 'host' ? 'Host backend: ranks are threads of this process whose model work is the reference model on the CPU; it is the same in every overhead row, so the differences are the serving path\'s.' : 'CUDA backend.',
  ],
  columns: [
    { header: 'phase', cell: (r) => r.phase },
    { header: 'requests', cell: (r) => `${r.ok}/${r.requests}` },
    { header: 'errors', cell: (r) => String(r.errors) },
    { header: 'p50Ms', cell: (r) => orDash(1)(r.p50Ms) },
    { header: 'p99Ms', cell: (r) => orDash(1)(r.p99Ms) },
    { header: 'req/s', cell: (r) => fixed(1)(r.requestsPerSecond) },
    { header: 'outTok/s', cell: (r) => fixed(0)(r.outputTokensPerSecond) },
    { header: 'steps', cell: (r) => String(r.steps) },
    { header: 'gpuHit', cell: (r) => String(r.gpuHitTokens) },
    { header: 'cpuHit', cell: (r) => String(r.cpuHitTokens) },
    { header: 'cpuUsPerStep', cell: (r) => orDash(1)(r.cpuUsPerStep) },
    { header: 'threadUsPerStep', cell: (r) => orDash(1)(r.threadUsPerStep) },
    { header: 'addedUsPerStep', cell: (r) => orDash(1)(r.addedUsPerStep) },
    { header: 'addedVsBareUsPerStep', cell: (r) => orDash(1)(r.addedVsBareUsPerStep) },
    { header: 'schedulerUsPerStep', cell: (r) => orDash(1)(r.schedulerUsPerStep) },
    { header: 'overheadShare', cell: (r) => percent(r.overheadShare) },
    { header: 'bareShare', cell: (r) => percent(r.bareShare) },
    { header: 'frontendUsPerStep', cell: (r) => orDash(1)(r.frontendUsPerStep) },
    { header: 'arrivalUsPerRequest', cell: (r) => orDash(2)(r.arrivalUsPerRequest) },
    { header: 'addedUsPerEvent', cell: (r) => orDash(2)(r.addedUsPerEvent) },
    { header: 'vsFloor', cell: (r) => orDash(2)(r.vsFloor) },
    { header: 'heapBeforeMiB', cell: (r) => orDash(1)(r.heapBeforeMiB) },
    { header: 'heapAfterMiB', cell: (r) => orDash(1)(r.heapAfterMiB) },
    { header: 'leakedGpuBlocks', cell: (r) => String(r.leakedGpuBlocks) },
  ],
  async run(backend, options) {
    const config = {
      backend,
      tp: options.engineInt('tp', 'tp', defaultTp(backend, MODEL_PRESETS.tiny.kvHeads)),
      gpuBlocks: options.engineInt('gpuBlocks', 'gpuBlocks', 8192),
      cpuBlocks: options.int('cpuBlocks', 16384, 1, engineIntRange('cpuBlocks').max),
      eviction: options.oneOf<EvictionPolicyName>('eviction', EVICTION_POLICY_NAMES, ENGINE_DEFAULTS.eviction),
      rate: options.positiveNumber('rate', 20),
      durationSeconds: options.int('duration', 20),
      connections: options.int('connections', 32),
      maxTokens: options.int('maxTokens', 32),
      systemTokens: options.int('systemTokens', 256, 0),
      userTokens: options.int('userTokens', 64),
      streams: options.int('streams', 256),
      streamTokens: options.int('streamTokens', 64),
      promptTokens: options.int('promptTokens', 128),
      repeats: options.int('repeats', 3),
      schedulerSteps: options.int('schedulerSteps', 500),
      streamInterval: options.int('streamInterval', 8),
    };
    options.finish();
    const { runServeBench } = await import('../bench/serve.js');
    return runServeBench({ ...config, onProgress: (line) => process.stderr.write(`  ${line}\n`) });
  },
};

/** Every model's KV heads split evenly over --tp ranks (the engine's rule). */
function checkTpSplitsHeads(options: BenchOptions, tp: number, models: readonly ModelPresetName[]): void {
  for (const model of models) {
    const issue = tpIssue(MODEL_PRESETS[model], tp);
    if (issue !== null) throw options.error(issue);
  }
}

/** As kvtier run: every GPU with cuda (lowered until it divides the model's KV heads), 2 ranks on host. */
function defaultTp(backend: BackendName, kvHeads: number): number {
  let tp = backend === 'cuda' ? Math.max(1, cudaDeviceCount()) : 2;
  while (kvHeads % tp !== 0) tp--;
  return tp;
}

function resolveBenchBackend(choice: 'auto' | BackendName): BackendName {
  if (choice === 'host') return 'host';
  const gpus = cudaDeviceCount();
  if (choice === 'cuda' && gpus === 0) throw new UsageError('bench: --backend cuda: no CUDA device was found');
  return gpus > 0 ? 'cuda' : 'host';
}

export async function benchCommand(kind: string, flags: LayeredInput): Promise<number> {
  const options = new BenchOptions(kind, flags);
  switch (kind as (typeof KINDS)[number]) {
    case 'transfer':
      return execute(kind, transferBench, options);
    case 'overlap':
      return execute(kind, overlapBench, options);
    case 'scheduler':
      return execute(kind, schedulerBench, options);
    case 'e2e':
      return execute(kind, e2eBench, options);
    case 'remote':
      return execute(kind, remoteBench, options);
    case 'share':
      return execute(kind, shareBench, options);
    case 'fidelity':
      return execute(kind, fidelityBench, options);
    case 'gpu':
      return executeGpu(options);
    case 'serve':
      return execute(kind, serveBench, options);
    default:
      throw new UsageError(`bench: unknown kind "${kind}" (known: ${KINDS.join(', ')})`);
  }
}

async function execute<Row>(kind: string, spec: BenchSpec<Row>, options: BenchOptions): Promise<number> {
  const backend = resolveBenchBackend(options.oneOf('backend', ['auto', 'host', 'cuda'], 'auto'));
  const json = options.optionalString('json');
  const markdown = options.optionalString('markdown');
  // Output files are checked before the bench runs, as kvtier run does.
  const outputs = [...(json === null ? [] : [{ flag: '--json', file: json }]), ...(markdown === null ? [] : [{ flag: '--markdown', file: markdown }])];
  const trace = options.peekString('trace');
  checkOutputsApart(outputs, trace === null ? [] : [{ flag: '--trace', file: trace }]);
  if (json !== null) await checkOutputFile('--json', json);
  if (markdown !== null) await checkOutputFile('--markdown', markdown);
  let rows: readonly Row[];
  try {
    rows = await spec.run(backend, options);
  } catch (error) {
    if (!(error instanceof BenchHelp)) throw error;
    process.stdout.write(`${error.text}\n`);
    return 0;
  }
  const results: BenchResults<Row> = {
    bench: kind,
    backend,
    machine: describeMachine(backend),
    date: new Date().toISOString(),
    results: rows,
  };
  process.stdout.write(`${textTable(rows, spec.columns)}\n`);
  try {
    await writeBenchFiles(results, spec.columns, { json, markdown }, spec.notes(backend));
  } catch (err) {
    // The table is already on stdout; say in one line which file could not be written.
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new OutputWriteError(`bench ${kind}: cannot write the results to ${[json, markdown].filter((f) => f !== null).join(' / ')}: ${why}`, { cause: err });
  }
  return 0;
}

/** The goals' table; `unmeasured`: small sizes or the host backend, so a verdict says nothing about a GPU. */
function goalColumns(unmeasured: boolean): readonly Column<GpuGoal>[] {
  const suffix = unmeasured ? ' (unmeasured)' : '';
  return [
    { header: 'goal', cell: (g) => g.goal },
    { header: 'met', cell: (g) => `${g.met ? 'met' : 'not met'}${suffix}` },
    { header: 'figure', cell: (g) => g.figure },
  ];
}

/**
 * `kvtier bench gpu`: the transfer and overlap benches, stress runs and an
 * offload comparison (src/bench/gpu.ts) in one command; prints their tables,
 * each goal as met or not with its figure, and the goals as JSON; --json
 * writes the whole report, --markdown the goals.
 */
async function executeGpu(options: BenchOptions): Promise<number> {
  const backend = resolveBenchBackend(options.oneOf('backend', ['auto', 'host', 'cuda'], 'auto'));
  const quick = options.flag('quick', false);
  const deviceIndex = options.int('device', 0, 0);
  const json = options.optionalString('json');
  const markdown = options.optionalString('markdown');
  try {
    options.finish();
  } catch (error) {
    if (!(error instanceof BenchHelp)) throw error;
    process.stdout.write(`${error.text}\n`);
    return 0;
  }
  if (json !== null) await checkOutputFile('--json', json);
  if (markdown !== null) await checkOutputFile('--markdown', markdown);
  const report = await runGpuBench({
    backend,
    quick,
    deviceIndex,
    onProgress: (line) => process.stderr.write(`  ${line}\n`),
  });
  const overlapColumns: readonly Column<GpuOverlapRow>[] = [
    { header: 'jobMiB', cell: (r) => String(r.jobMiB) },
    ...(overlapBench.columns as readonly Column<GpuOverlapRow>[]),
  ];
  const notes = [
    report.hostFigures
      ? 'Host backend: these figures are the host\'s (memcpy, small sizes), not a GPU\'s; the goals are not measured here.'
      : `CUDA backend${report.quick ? ' (--quick: small sizes, the goals are not measured)' : ''}: every ratio is against a contiguous copy in the same run.`,
    `Took ${report.seconds.toFixed(1)} s.`,
  ];
  process.stdout.write(`${textTable(report.transfer, transferBench.columns)}\n\n`);
  process.stdout.write(`${textTable(report.overlap, overlapColumns)}\n\n`);
  const goals = goalColumns(report.quick || report.hostFigures);
  process.stdout.write(`${textTable(report.goals, goals)}\n\n${notes.join('\n')}\n`);
  process.stdout.write(`${JSON.stringify({ backend: report.backend, hostFigures: report.hostFigures, goals: report.goals })}\n`);
  const results: BenchResults<GpuGoal> = {
    bench: 'gpu',
    backend,
    machine: describeMachine(backend),
    date: new Date().toISOString(),
    results: report.goals,
  };
  try {
    await writeBenchFiles(results, goals, { json: null, markdown }, notes);
    if (json !== null) await writeBenchFiles({ ...results, report } as BenchResults<GpuGoal>, goals, { json, markdown: null });
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new OutputWriteError(`bench gpu: cannot write the results to ${[json, markdown].filter((f) => f !== null).join(' / ')}: ${why}`, { cause: err });
  }
  return 0;
}
