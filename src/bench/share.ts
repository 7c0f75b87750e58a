import { EngineError } from '../core/errors.js';
import type { BackendName } from '../device/types.js';
import { IntegrityChecker } from '../report/integrity.js';
import { Engine } from '../runtime/engine.js';
import { MAX_CPU_BLOCKS } from '../config/limits.js';
import type { EngineConfigInput, FinishedRequest } from '../runtime/engine-types.js';
import { driveWorkload } from '../workload/drive.js';
import { loadTrace, type Trace } from '../workload/trace.js';
import { TraceWorkload } from '../workload/trace-workload.js';
import { probeRemote, RemoteStore } from '../remote/remote-store.js';
import { parseRemoteUrl } from '../remote/remote-url.js';
import { startPrivateServer } from './private-server.js';

/**
 * `kvtier bench share`: two engines share one remote tier. The first replays
 * the first half of a trace slice and writes through to the server; the
 * second, with an empty CPU tier of its own, replays the second half. The
 * limit, measured in the same run: one engine with a CPU tier large enough to
 * never evict, replaying the whole slice, and what it hits on the same
 * second-half requests. ratio = the second engine's remote hit tokens over
 * the single engine's CPU-tier hit tokens on those requests. Both count per
 * request: a remote hit token is a token a request hit in a CPU-tier block
 * the remote filled, whichever request's fetch filled it (`servedTokens`), as
 * the single engine counts a CPU-tier block once for every request that hits
 * it. Tokens fetched (`hitTokens`) count a block once however many requests
 * read it, so they undercount against that limit.
 */

export interface ShareBenchOptions {
  readonly backend: BackendName;
  readonly traceFile: string;
  readonly maxRequests: number;
  readonly tokenScale: number;
  readonly model: string;
  readonly tp: number;
  readonly blockSize: number;
  readonly gpuBlocks: number;
  /** CPU tier of each sharing engine, in offloaded blocks. */
  readonly cpuBlocks: number;
  /** A server to use; null: a private redis-server on a free loopback port. */
  readonly url: string | null;
  /** The sharing engines' remoteTimeoutMs. */
  readonly timeoutMs: number;
}

export interface ShareBenchRow {
  readonly run: 'first half, remote' | 'second half, remote' | 'whole slice, unbounded CPU tier';
  readonly requests: number;
  readonly cpuBlocks: number;
  /** Prompt tokens of the second half's requests (the same requests in every row but the first). */
  readonly promptTokens: number;
  readonly gpuHitTokens: number;
  readonly cpuHitTokens: number;
  readonly remoteHitTokens: number | null;
  /** Tokens the engine's fetches read from the remote (a block once, however many requests hit it). */
  readonly fetchedTokens: number | null;
  /** Second half: remoteHitTokens / the unbounded run's cpuHitTokens on the same requests. */
  readonly ratio: number | null;
  readonly verified: number;
  readonly mismatches: number;
}

interface HalfRun {
  readonly finished: FinishedRequest[];
  readonly remoteHitTokens: number | null;
  readonly fetchedTokens: number | null;
  readonly verified: number;
  readonly mismatches: number;
}

export async function runShareBench(options: ShareBenchOptions): Promise<ShareBenchRow[]> {
  const trace = await loadTrace(options.traceFile, { maxRequests: options.maxRequests, tokenScale: options.tokenScale });
  if (trace.records.length < 2) throw new EngineError(`share bench: ${options.traceFile} holds fewer than 2 requests`);
  const half = Math.floor(trace.records.length / 2);
  const first = slice(trace, 0, half);
  const second = slice(trace, half, trace.records.length);
  const secondIds = new Set(second.records.map((r) => `trace-L${r.line}`));
  const server = options.url === null ? await startPrivateServer('bench share') : null;
  const url = options.url ?? `redis://127.0.0.1:${server!.port}`;
  let a: HalfRun;
  let b: HalfRun;
  const namespace = `share-${process.pid}-${Date.now()}`;
  try {
    const remote = { remote: url, remoteNamespace: namespace, remoteTimeoutMs: options.timeoutMs };
    a = await replay(options, first, { cpuBlocks: options.cpuBlocks, ...remote });
    b = await replay(options, second, { cpuBlocks: options.cpuBlocks, ...remote });
  } finally {
    // A server of the user's keeps nothing of the bench (the engines set no expiry on what they write).
    if (server === null) await deleteNamespace(url, namespace, options.timeoutMs);
    await server?.stop();
  }
  const unbounded = Math.min(MAX_CPU_BLOCKS, totalTokens(trace) / options.blockSize + 64);
  const c = await replay(options, trace, { cpuBlocks: Math.ceil(unbounded) });
  const cSecond = c.finished.filter((f) => secondIds.has(f.id));
  const row = (run: ShareBenchRow['run'], r: HalfRun, finished: readonly FinishedRequest[], cpuBlocks: number): ShareBenchRow => ({
    run,
    requests: finished.length,
    cpuBlocks,
    promptTokens: sum(finished, (f) => f.promptTokens.length),
    gpuHitTokens: sum(finished, (f) => f.gpuPrefixHitTokens),
    cpuHitTokens: sum(finished, (f) => f.cpuTierHitTokens),
    remoteHitTokens: r.remoteHitTokens,
    fetchedTokens: r.fetchedTokens,
    ratio: null,
    verified: r.verified,
    mismatches: r.mismatches,
  });
  const limit = row('whole slice, unbounded CPU tier', c, cSecond, Math.ceil(unbounded));
  const shared = row('second half, remote', b, b.finished, options.cpuBlocks);
  return [
    row('first half, remote', a, a.finished, options.cpuBlocks),
    { ...shared, ratio: limit.cpuHitTokens > 0 ? (b.remoteHitTokens ?? 0) / limit.cpuHitTokens : null },
    limit,
  ];
}

function slice(trace: Trace, from: number, to: number): Trace {
  const records = trace.records.slice(from, to);
  return { ...trace, records, originMs: records[0].timestampMs };
}

function totalTokens(trace: Trace): number {
  return trace.records.reduce((n, r) => n + r.inputLength + r.outputLength, 0);
}

/** Deletes the bench's keys from a server it did not start. */
async function deleteNamespace(url: string, namespace: string, timeoutMs: number): Promise<void> {
  const address = parseRemoteUrl(url, '--url');
  const { cluster } = await probeRemote(address, timeoutMs);
  const store = new RemoteStore({ address, timeoutMs: Math.max(timeoutMs, 5_000), cluster });
  try {
    await store.connect();
    await store.deleteMatching(`kvt:${namespace}:*`);
  } finally {
    await store.close();
  }
}

function sum<T>(items: readonly T[], pick: (item: T) => number): number {
  let n = 0;
  for (const item of items) n += pick(item);
  return n;
}

async function replay(options: ShareBenchOptions, trace: Trace, extra: EngineConfigInput): Promise<HalfRun> {
  const config: EngineConfigInput = {
    backend: options.backend,
    model: options.model,
    tp: options.tp,
    blockSize: options.blockSize,
    gpuBlocks: options.gpuBlocks,
    maxModelLen: options.gpuBlocks * options.blockSize,
    ...extra,
  };
  const engine = await Engine.create(config);
  const finished: FinishedRequest[] = [];
  const integrity = new IntegrityChecker(engine.config.model);
  try {
    const workload = new TraceWorkload(trace, { vocabSize: engine.config.model.vocabSize, arrivals: false });
    const drive = await driveWorkload(engine, workload, (f) => {
      finished.push(f);
      integrity.add(f);
    });
    if (drive.stopped !== null) throw new EngineError(`share bench: the engine stopped: ${drive.stopped.message}`, { cause: drive.stopped });
  } catch (error) {
    await integrity.finish().catch(() => {});
    throw error;
  } finally {
    await engine.shutdown();
  }
  const summary = await integrity.finish();
  const remote = engine.metrics().remote;
  return { finished, remoteHitTokens: remote?.servedTokens ?? null, fetchedTokens: remote?.hitTokens ?? null, verified: summary.checked, mismatches: summary.mismatches };
}
