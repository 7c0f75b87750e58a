import { cudaDeviceCount } from '../device/native.js';
import type { BackendName, KvLayout } from '../device/types.js';
import { MODEL_PRESET_NAMES, MODEL_PRESETS, type ModelPresetName } from '../model/presets.js';
import { describeMachine } from '../bench/machine.js';
import { textTable, writeBenchFiles, type BenchResults, type Column } from '../bench/results.js';
import { runSchedulerBench, type SchedulerBenchRow } from '../bench/scheduler.js';
import { runTransferBench, type TransferBenchRow } from '../bench/transfer.js';
import { createOffloadingConnector } from '../offload/create-connector.js';
import { BenchOptions } from './bench-options.js';
import { UsageError } from './usage-error.js';

/**
 * `kvtier bench <kind>`: every bench takes --backend auto|host|cuda,
 * --json FILE and --markdown FILE, prints a table, and reports its figures as
 * ratios against a limit measured in the same run where there is one.
 */

const KINDS = ['transfer', 'scheduler'] as const;

interface BenchSpec<Row> {
  readonly columns: readonly Column<Row>[];
  readonly notes: readonly string[];
  run(backend: BackendName, options: BenchOptions): Promise<readonly Row[]>;
}

const fixed = (digits: number) => (x: number) => x.toFixed(digits);

const transferBench: BenchSpec<TransferBenchRow> = {
  notes: [
    'gbps: blocks moved between the GPU KV cache and the CPU tier by transfer jobs; limitGbps: one contiguous copy of the same bytes in the same run; ratio = gbps / limitGbps.',
  ],
  columns: [
    { header: 'model', cell: (r) => r.model },
    { header: 'layout', cell: (r) => r.layout },
    { header: 'blockTokens', cell: (r) => String(r.blockTokens) },
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
    const blockTokens = options.intList('blockTokens', [16, 32, 64, 128, 256]);
    const totalBytes = options.bytes('totalBytes', 64 * 2 ** 20);
    const repeats = options.int('repeats', 5);
    const tp = options.int('tp', 1);
    options.finish();
    return runTransferBench({
      backend,
      models: models.map((m) => MODEL_PRESETS[m]),
      layouts,
      blockTokens,
      totalBytes,
      repeats,
      tp,
      onRow: (row) => process.stderr.write(`  ${row.model} ${row.layout} ${row.blockTokens} ${row.direction}: ${row.gbps.toFixed(2)} GB/s (${(100 * row.ratio).toFixed(0)}% of the contiguous copy)\n`),
    });
  },
};

const schedulerBench: BenchSpec<SchedulerBenchRow> = {
  notes: [
    'usPerStep: CPU microseconds (user + system) of Scheduler.schedule() + updateFromOutput() per decode step, with that many running requests; no model work is timed.',
  ],
  columns: [
    { header: 'runningRequests', cell: (r) => String(r.runningRequests) },
    { header: 'offload', cell: (r) => (r.withConnector ? 'on' : 'off') },
    { header: 'usPerStep', cell: (r) => fixed(1)(r.usPerStep) },
    { header: 'usPerRequestStep', cell: (r) => fixed(3)(r.usPerRequestStep) },
    { header: 'wallUsPerStep', cell: (r) => fixed(1)(r.wallUsPerStep) },
    { header: 'p99WallUs', cell: (r) => fixed(1)(r.p99WallUsPerStep) },
  ],
  async run(_backend, options) {
    const runningRequests = options.intList('running', [256, 1024, 4096]);
    const steps = options.int('steps', 500);
    const offload = options.flag('offload', true);
    const promptTokens = options.int('promptTokens', 128);
    options.finish();
    return runSchedulerBench({
      runningRequests,
      steps,
      promptTokens,
      connector: offload
        ? (config) =>
            createOffloadingConnector({
              model: MODEL_PRESETS.tiny,
              tp: 1,
              blockSize: config.blockSize,
              offloadFactor: 1,
              cpuBlocks: config.numGpuBlocks * 4,
              eviction: 'lru',
              storePolicy: 'on-compute',
            }).connector
        : undefined,
    });
  },
};

function resolveBenchBackend(choice: 'auto' | BackendName): BackendName {
  if (choice === 'host') return 'host';
  const gpus = cudaDeviceCount();
  if (choice === 'cuda' && gpus === 0) throw new UsageError('bench: --backend cuda: no CUDA device was found');
  return gpus > 0 ? 'cuda' : 'host';
}

export async function benchCommand(kind: string, raw: Record<string, string | boolean>): Promise<number> {
  const options = new BenchOptions(kind, raw);
  switch (kind as (typeof KINDS)[number]) {
    case 'transfer':
      return execute(kind, transferBench, options);
    case 'scheduler':
      return execute(kind, schedulerBench, options);
    default:
      throw new UsageError(`bench: unknown kind "${kind}" (known: ${KINDS.join(', ')})`);
  }
}

async function execute<Row>(kind: string, spec: BenchSpec<Row>, options: BenchOptions): Promise<number> {
  const backend = resolveBenchBackend(options.oneOf('backend', ['auto', 'host', 'cuda'], 'auto'));
  const json = options.optionalString('json');
  const markdown = options.optionalString('markdown');
  const rows = await spec.run(backend, options);
  const results: BenchResults<Row> = {
    bench: kind,
    backend,
    machine: describeMachine(backend),
    date: new Date().toISOString(),
    results: rows,
  };
  process.stdout.write(`${textTable(rows, spec.columns)}\n`);
  await writeBenchFiles(results, spec.columns, { json, markdown }, spec.notes);
  return 0;
}
