import { DEFAULT_GPU_PROFILE, GPU_PROFILE_NAMES } from '../timing/gpu-profiles.js';
import { Command } from 'commander';
import { MODEL_PRESET_NAMES } from '../model/presets.js';
import { MULTITURN_DEFAULTS } from '../workload/multiturn.js';
import { DEFAULT_START_DEADLINE_MS } from '../config/limits.js';
import { ENGINE_DEFAULTS } from '../config/engine-schema.js';
import { EVICTION_POLICY_NAMES } from '../config/eviction-policy-names.js';
import { RUN_DEFAULTS } from './run-defaults.js';
import { LOG_LEVELS, MONITORING_DEFAULTS } from './run-monitoring-config.js';

/**
 * The flags of `kvtier run`. Options carry no commander defaults: a value is
 * either given on the command line or comes from the config file or
 * RUN_DEFAULTS, so the config layer can tell what the user set.
 */
export function createRunCommand(): Command {
  return new Command('run')
    .description('serve a workload (built-in multi-turn chat or a Mooncake trace) through the engine and report what offloading bought')
    .option('--config <file>', 'JSON or YAML file of settings (.json, .yaml, .yml; else told by its content); keys are the flags\' camelCase names (e.g. "gpuBlocks", "offload": false); flags override it; relative paths in it are relative to the file')
    .option('--backend <name>', 'auto | host | cuda (default auto: cuda when a GPU is found, else host)')
    .option('--tp <n>', 'tensor-parallel ranks (default: CUDA device count with cuda, 2 on host)')
    .option('--model <name>', `model preset: ${MODEL_PRESET_NAMES.join(' | ')} (default ${RUN_DEFAULTS.model})`)
    .option('--layout <layout>', `KV layout: cross-layer | per-layer (default ${RUN_DEFAULTS.layout})`)
    .option('--block-size <tokens>', `tokens per GPU block (default ${RUN_DEFAULTS.blockSize})`)
    .option('--gpu-blocks <n>', `GPU KV blocks per rank (default ${RUN_DEFAULTS.gpuBlocks})`)
    .option('--cpu-blocks <n>', `CPU tier size in offloaded blocks (default ${RUN_DEFAULTS.cpuBlocks})`)
    .option('--cpu-bytes <size>', 'CPU tier size in bytes over all ranks, e.g. 512MiB, 2GiB, 1.5GB (instead of --cpu-blocks)')
    .option('--offload-factor <n>', `GPU blocks per offloaded block (default ${RUN_DEFAULTS.offloadFactor})`)
    .option('--eviction <policy>', `CPU tier eviction: ${EVICTION_POLICY_NAMES.join(' | ')} (default ${RUN_DEFAULTS.eviction})`)
    .option('--store-policy <policy>', `on-compute | on-evict | reuse:K (default ${RUN_DEFAULTS.storePolicy})`)
    .option('--no-offload', 'run without the CPU tier')
    .option('--remote <url>', 'a shared remote tier behind the CPU tier: redis://[user:pass@]host:port or rediss://... (Redis/Valkey server or cluster)')
    .option('--remote-policy <policy>', `remote writes: write-through (after each CPU-tier store) | write-back (when the CPU tier evicts) (default ${ENGINE_DEFAULTS.remotePolicy})`)
    .option('--remote-timeout-ms <ms>', `bound on every remote command; a slower lookup is a miss (default ${ENGINE_DEFAULTS.remoteTimeoutMs})`)
    .option('--remote-write-attempts <n>', `tries a remote write gets when it fails transiently; 1: never retried (default ${ENGINE_DEFAULTS.remoteWriteAttempts})`)
    .option('--remote-retry-backoff-ms <ms>', `wait before a failed remote write's first retry, doubling for each further one (default ${ENGINE_DEFAULTS.remoteRetryBackoffMs})`)
    .option('--remote-namespace <name>', 'name engines sharing the remote tier agree on (default: the model name)')
    .option('--remote-secret-file <file>', 'file holding the secret remote values are authenticated with (at least 16 bytes; default: $KVTIER_REMOTE_SECRET, else none: the server must then be trusted by everyone who can write to it)')
    .option('--remote-encrypt', 'encrypt remote values too (AES-256-GCM), so a reader of the server learns nothing of the KV; needs a secret')
    .option('--workload <kind>', 'multiturn | trace (default multiturn; trace when --trace is given)')
    .option('--requests <n>', `multiturn: requests in all (default ${MULTITURN_DEFAULTS.requests})`)
    .option('--rounds <n>', `multiturn: rounds per conversation (default ${MULTITURN_DEFAULTS.rounds})`)
    .option('--seed <n>', `multiturn: seed of all token ids and timings (default ${MULTITURN_DEFAULTS.seed})`)
    .option('--trace <file>', 'replay a Mooncake trace (JSONL: timestamp, input_length, output_length, hash_ids)')
    .option('--max-requests <n>', 'trace: replay at most N requests (after --time-window)')
    .option('--time-window <start:end>', 'trace: replay requests arriving START..END seconds into the trace (e.g. 0:600, 60:)')
    .option('--token-scale <n>', 'trace: divide lengths and the 512-token trace block by N (a divisor of 512)')
    .option('--speedup <x>', 'trace: divide arrival times by X')
    .option('--no-arrivals', 'trace: submit every request at once, ignoring timestamps')
    .option('--faults <plan>', 'fault injection plan for chaos runs')
    .option('--fault-seed <n>', `seed of probabilistic faults (default ${RUN_DEFAULTS.faultSeed})`)
    .option('--failure-policy <policy>', `after a failed load: recompute | fail (default ${RUN_DEFAULTS.failurePolicy})`)
    .option('--rank-restart', 'respawn a dead rank and recompute instead of failing the run')
    .option('--copy-method <method>', 'transfer path on the CUDA backend: kernel | dma | auto (default auto: the copy kernel for regions under 1 MiB, DMA above; the host backend copies with memcpy either way)')
    .option('--step-deadline-ms <ms>', 'a rank that misses a step by this long is declared dead')
    .option('--start-deadline-ms <ms>', `a rank that takes longer to open its device, at start or after a restart, is declared dead (default ${DEFAULT_START_DEADLINE_MS})`)
    .option('--compare', 'run the workload with offloading off, then on, and report them side by side')
    .option('--json <file>', 'also write the report as JSON')
    .option('--html <file>', 'also write an HTML report: TTFT distribution, hit shares and transfer rates over time')
    .option('--device-trace <file>', "also write a Chrome trace (JSON; open it in Perfetto or chrome://tracing) of every forward and copy job each rank's device ran, as the device timed them: one process per rank, one thread per stream (compute, load, store); each rank's times count from its own device's open, so compare spans within a rank; with --compare, of the offload-on run. A summary of each rank's copy jobs beside and apart from its forwards follows the report")
    .option('--max-num-seqs <n>', 'scheduler: most requests running at once')
    .option('--max-batched-tokens <n>', 'scheduler: most tokens per step')
    .option('--max-model-len <n>', 'longest prompt plus output the engine accepts')
    .option('--gpu <profile>', `the GPU the step clock prices steps on (and, on the host backend, whose host link transfers follow): ${GPU_PROFILE_NAMES.join(' | ')} (default: the CUDA device's own, else ${DEFAULT_GPU_PROFILE})`)
    .option('--compute-ns-per-token <ns>', 'replace the step clock by a flat compute time per token (ns, whole model)')
    .option('--metrics-port <port>', 'serve Prometheus metrics at http://HOST:PORT/metrics for the whole run (0: any free port)')
    .option('--metrics-host <host>', `address the metrics endpoint listens on (default ${MONITORING_DEFAULTS.metricsHost})`)
    .option('--metrics-linger-ms <ms>', 'keep serving /metrics this long after the run ended, for a last scrape (default 0; a signal ends it)')
    .option('--log-level <level>', `${LOG_LEVELS.join(' | ')} (default ${MONITORING_DEFAULTS.logLevel}); logs go to stderr`)
    .option('--log-format <format>', `pretty | json (one JSON object per line) (default ${MONITORING_DEFAULTS.logFormat})`)
    .option('--slow-step-ms <ms>', 'log a warning for every engine step slower than this (wall time)')
    .option('--kv-events-endpoint <endpoint>', "publish KV cache events (vLLM's format) on a ZeroMQ PUB socket: tcp://*:5557 binds, tcp://HOST:PORT connects to a subscriber that binds")
    .option('--kv-events-topic <topic>', 'topic frame of every KV event message (default "", as vLLM)')
    .option('--kv-events-replay-endpoint <endpoint>', 'ZeroMQ ROUTER endpoint where subscribers ask for missed KV event batches by sequence number')
    .option('--kv-events-encoding <encoding>', "map (vLLM's current event encoding) | array (the positional encoding of earlier vLLM releases) (default map)")
    .allowExcessArguments(false);
}
