import { kvGeometry } from '../core/kv-geometry.js';
import { performance } from 'node:perf_hooks';
import { startPrivateServer } from './private-server.js';
import { openDevice } from '../device/device.js';
import type { BackendName, Device } from '../device/types.js';
import type { ModelShape } from '../model/shape.js';
import { RankRemoteTier } from '../remote/rank-remote.js';
import type { RemoteBlockRef, RemoteStepMetadata } from '../protocol/remote-jobs.js';
import { remoteNamespace, shardKey } from '../remote/remote-keys.js';
import { probeRemote, RemoteStore } from '../remote/remote-store.js';
import { parseRemoteUrl } from '../remote/remote-url.js';
import { HEADER_BYTES } from '../remote/value-format.js';
import { createHash, randomBytes } from 'node:crypto';
import { authKeysOf, type RemoteAuthMode } from '../remote/value-auth.js';

/**
 * `kvtier bench remote`: GB/s of remote writes and reads through the tier
 * (a rank's RankRemoteTier: CPU-tier block copied into its value with its
 * checksum, header, SET; GET, header check, payload copied into the CPU-tier
 * block with its checksum checked), against
 * plain pipelined SET/GET of values of the same size on the same server in
 * the same run. Both sides issue the same number of commands at once, so the
 * ratio is what the tier's own work costs. Each protection of the values
 * (none, HMAC, AES-GCM) is measured in the same run, so their rows compare.
 */

export interface RemoteBenchOptions {
  readonly backend: BackendName;
  /** A server to use; null: start a private redis-server on a free loopback port. */
  readonly url: string | null;
  readonly models: readonly ModelShape[];
  readonly blockTokens: readonly number[];
  /** Payload bytes moved per measurement (rounded to whole blocks, at least 8). */
  readonly totalBytes: number;
  /** Blocks per job (a request's store or fetch). */
  readonly jobBlocks: number;
  readonly repeats: number;
  /** How values are protected, each measured in the same run: none (CRC only), mac (HMAC-SHA-256), encrypt (AES-256-GCM). */
  readonly auth: readonly RemoteBenchAuth[];
}

export type RemoteBenchAuth = 'none' | RemoteAuthMode;

export interface RemoteBenchRow {
  readonly model: string;
  readonly blockTokens: number;
  /** One value's payload (a rank's shard of one block, tp 1). */
  readonly valueKiB: number;
  readonly auth: RemoteBenchAuth;
  readonly op: 'write' | 'read';
  readonly blocks: number;
  readonly bytes: number;
  /** Best of the repeats, payload bytes over wall time. */
  readonly gbps: number;
  /** Plain pipelined SET (write) or GET (read) of values of the same size, best of the repeats. */
  readonly limitGbps: number;
  readonly ratio: number;
}

export async function runRemoteBench(options: RemoteBenchOptions): Promise<RemoteBenchRow[]> {
  const server = options.url === null ? await startPrivateServer() : null;
  const url = options.url ?? `redis://127.0.0.1:${server!.port}`;
  try {
    const address = parseRemoteUrl(url, '--url');
    const { cluster } = await probeRemote(address, 2000);
    const plain = new RemoteStore({ address, timeoutMs: 60_000, cluster });
    await plain.connect();
    const rows: RemoteBenchRow[] = [];
    try {
      for (const model of options.models) {
        for (const blockTokens of options.blockTokens) {
          rows.push(...(await benchOneSize(options, model, blockTokens, url, cluster, plain)));
        }
      }
    } finally {
      await plain.close();
    }
    return rows;
  } finally {
    await server?.stop();
  }
}

async function benchOneSize(
  options: RemoteBenchOptions,
  model: ModelShape,
  blockTokens: number,
  url: string,
  cluster: boolean,
  plain: RemoteStore,
): Promise<RemoteBenchRow[]> {
  const probe = await openBenchDevice(options.backend, model, blockTokens, 1);
  const blockBytes = probe.info.bytesPerCpuBlock;
  probe.close();
  const blocks = Math.max(8, Math.ceil(options.totalBytes / blockBytes));
  const device = await openBenchDevice(options.backend, model, blockTokens, blocks);
  // One secret per run: what is measured is the cost of the MAC or cipher, not any key.
  const secret = randomBytes(32);
  const tiers = options.auth.map((auth) => {
    const ns = remoteNamespace(
      { namespace: `kvtier-bench-${auth}`, model, layout: 'cross-layer', blockSize: blockTokens, offloadFactor: 1, tp: 1 },
      auth === 'none' ? null : secret,
      auth === 'none' ? 'mac' : auth,
    );
    const tier = new RankRemoteTier(device, 0, 1, {
      url,
      cluster,
      timeoutMs: 60_000,
      namespace: ns.name,
      namespaceDigestHex: ns.digest.toString('hex'),
      blockTokens,
      maxInFlightWrites: blocks,
      // The bench measures the link: a failed write is not tried again.
      retry: { writeAttempts: 1, backoffMs: 0 },
      auth: ns.auth ? authKeysOf(ns.auth) : null,
    });
    return { auth, ns, tier, write: 0, read: 0 };
  });
  try {
    for (const t of tiers) await t.tier.start();
    const refs: RemoteBlockRef[] = [];
    for (let i = 0; i < blocks; i++) {
      const payload = Buffer.alloc(blockBytes, (i * 31) & 0xff);
      device.writeCpuBlock(i, payload);
      const digest = createHash('sha256').update(`bench ${model.name} ${blockTokens} ${i}`).digest('hex');
      refs.push({ digestHex: digest, cpuBlockId: i });
    }
    const jobs = (kind: 'writes' | 'fetches'): RemoteStepMetadata => {
      const list = [];
      for (let i = 0; i < blocks; i += options.jobBlocks) list.push({ jobId: i + 1, blocks: refs.slice(i, i + options.jobBlocks) });
      return kind === 'writes' ? { writes: list, fetches: [] } : { writes: [], fetches: list };
    };
    const value = Buffer.alloc(blockBytes + HEADER_BYTES, 7);
    const plainKeys = refs.map((r) => shardKey({ ...tiers[0].ns, name: 'kvtier-bench-plain' }, r.digestHex, 0));
    let setLimit = 0;
    let getLimit = 0;
    const rate = (ms: number) => (blocks * blockBytes) / 1e9 / (ms / 1000);
    // Each repeat measures every protection in turn, so all see the same server and machine state.
    for (let r = 0; r < options.repeats; r++) {
      for (const t of tiers) {
        t.write = Math.max(t.write, rate(await timeTier(t.tier, jobs('writes'))));
        t.read = Math.max(t.read, rate(await timeTier(t.tier, jobs('fetches'))));
      }
      setLimit = Math.max(setLimit, rate(await timePlain(() => Promise.all(plainKeys.map((k) => plain.set(k, value))))));
      getLimit = Math.max(getLimit, rate(await timePlain(() => Promise.all(plainKeys.map((k) => plain.get(k))))));
    }
    await plain.del([...plainKeys, ...tiers.flatMap((t) => refs.map((r) => shardKey(t.ns, r.digestHex, 0)))]);
    const row = (auth: RemoteBenchAuth, op: 'write' | 'read', gbps: number, limitGbps: number): RemoteBenchRow => ({
      model: model.name,
      blockTokens,
      valueKiB: blockBytes / 1024,
      auth,
      op,
      blocks,
      bytes: blocks * blockBytes,
      gbps,
      limitGbps,
      ratio: gbps / limitGbps,
    });
    return tiers.flatMap((t) => [row(t.auth, 'write', t.write, setLimit), row(t.auth, 'read', t.read, getLimit)]);
  } finally {
    for (const t of tiers) await t.tier.close();
    device.close();
  }
}

async function openBenchDevice(backend: BackendName, model: ModelShape, blockTokens: number, cpuBlocks: number): Promise<Device> {
  return openDevice({
    backend,
    rank: 0,
    deviceIndex: 0,
    geometry: kvGeometry({ model, tp: 1, blockSize: blockTokens }),
    numGpuBlocks: 1,
    numCpuBlocks: cpuBlocks,
  });
}

/** Runs one step's remote jobs on the rank's tier and waits until every one was reported; ms of wall time. */
async function timeTier(tier: RankRemoteTier, meta: RemoteStepMetadata): Promise<number> {
  const expected = meta.writes.length + meta.fetches.length;
  const t0 = performance.now();
  tier.startStep(meta);
  let done = 0;
  while (done < expected) {
    await tier.waitForProgress(50);
    for (const result of tier.collect()) {
      if (!result.ok) throw new Error(`remote bench: a ${result.kind} job failed (${result.failure})`);
      done++;
    }
  }
  return performance.now() - t0;
}

async function timePlain(run: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await run();
  return performance.now() - t0;
}
