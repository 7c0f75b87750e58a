import { createHash } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../src/device/device.js';
import type { Device } from '../../src/device/types.js';
import type { RemoteBlockRef, RemoteJobResult, RemoteStepMetadata } from '../../src/protocol/remote-jobs.js';
import { RankRemoteTier } from '../../src/remote/rank-remote.js';
import { remoteNamespace, shardKey, type RemoteNamespace } from '../../src/remote/remote-keys.js';
import { RemoteStore } from '../../src/remote/remote-store.js';
import { parseRemoteUrl } from '../../src/remote/remote-url.js';
import { HEADER_BYTES } from '../../src/remote/value-format.js';
import { TINY_NO_COMPUTE } from '../support/tiny.js';
import { haveRedis, noteRedisSkip, startRedis, type RedisServer } from '../support/redis-server.js';
import { kvGeometry } from '../../src/core/kv-geometry.js';

/**
 * One rank's remote tier on the host device against a real server: blocks of
 * 128 KiB, so a job's values share write slabs and its reads take more than
 * one command.
 */

const BLOCK_TOKENS = 512;
const CPU_BLOCKS = 24;

noteRedisSkip('the rank remote tier tests');

describe.skipIf(!haveRedis)("a rank's remote tier", () => {
  let server: RedisServer;
  let plain: RemoteStore;
  let device: Device;
  let tier: RankRemoteTier;
  let ns: RemoteNamespace;
  let nextJob = 1;

  beforeAll(async () => {
    server = await startRedis();
    plain = new RemoteStore({ address: parseRemoteUrl(server.url), timeoutMs: 2000, cluster: false });
    await plain.connect();
  });
  afterAll(async () => {
    await plain?.close();
    await server?.stop();
  });
  afterEach(async () => {
    await tier?.close();
    device?.close();
  });

  async function openTier(): Promise<void> {
    device = await openDevice({
      backend: 'host',
      rank: 0,
      deviceIndex: 0,
      geometry: kvGeometry({ model: TINY_NO_COMPUTE, tp: 1, blockSize: BLOCK_TOKENS, layout: 'per-layer' }),
      numGpuBlocks: 1,
      numCpuBlocks: CPU_BLOCKS,
    });
    ns = remoteNamespace({ namespace: 'rank-test', model: TINY_NO_COMPUTE, layout: 'per-layer', blockSize: BLOCK_TOKENS, offloadFactor: 1, tp: 1 });
    tier = new RankRemoteTier(device, 0, 1, {
      url: server.url,
      cluster: false,
      timeoutMs: 2000,
      namespace: ns.name,
      namespaceDigestHex: ns.digest.toString('hex'),
      blockTokens: BLOCK_TOKENS,
      maxInFlightWrites: CPU_BLOCKS,
      retry: { writeAttempts: 1, backoffMs: 0 },
    });
    await tier.start();
  }

  /** Distinct bytes for CPU block `id`, tagged so that runs do not share values. */
  function fillBlock(id: number, tag: string): Buffer {
    const image = Buffer.alloc(device.info.bytesPerCpuBlock);
    const seed = createHash('sha256').update(`${tag} ${id}`).digest();
    for (let i = 0; i < image.length; i += 32) seed.copy(image, i, 0, Math.min(32, image.length - i));
    image.writeUInt32LE(id, 0);
    device.writeCpuBlock(id, image);
    return image;
  }

  function refs(tag: string, ids: readonly number[], into: readonly number[] = ids): RemoteBlockRef[] {
    return ids.map((id, i) => ({ digestHex: createHash('sha256').update(`${tag} block ${id}`).digest('hex'), cpuBlockId: into[i] }));
  }

  /** Runs one step's jobs and waits until each was reported. */
  async function runStep(meta: RemoteStepMetadata): Promise<RemoteJobResult[]> {
    tier.startStep(meta);
    const expected = meta.writes.length + meta.fetches.length;
    const results: RemoteJobResult[] = [];
    const deadline = Date.now() + 10_000;
    while (results.length < expected && Date.now() < deadline) {
      await tier.waitForProgress(50);
      results.push(...tier.collect());
    }
    expect(results).toHaveLength(expected);
    return results.sort((a, b) => a.jobId - b.jobId);
  }

  const writeJob = (blocks: RemoteBlockRef[]) => ({ jobId: nextJob++, blocks });

  it('writes blocks and reads them back byte for byte into other CPU blocks', async () => {
    await openTier();
    const images = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((id) => fillBlock(id, 'roundtrip'));
    const written = await runStep({ writes: [writeJob(refs('roundtrip', [0, 1, 2, 3, 4, 5, 6, 7])), writeJob(refs('roundtrip', [8, 9]))], fetches: [] });
    expect(written.map((r) => r.ok)).toEqual([true, true]);
    expect(written[0].bytes).toBe(8 * (HEADER_BYTES + device.info.bytesPerCpuBlock));
    const into = [12, 13, 14, 15, 16, 17, 18, 19, 20, 21];
    const fetched = await runStep({
      writes: [],
      fetches: [writeJob(refs('roundtrip', [0, 1, 2, 3, 4, 5, 6, 7], into.slice(0, 8))), writeJob(refs('roundtrip', [8, 9], into.slice(8)))],
    });
    expect(fetched.map((r) => r.ok)).toEqual([true, true]);
    into.forEach((cpuBlockId, i) => expect(device.readCpuBlock(cpuBlockId).equals(images[i])).toBe(true));
  });

  it('refuses a value whose payload was changed on the server, as a value failure', async () => {
    await openTier();
    [0, 1, 2].forEach((id) => fillBlock(id, 'changed'));
    const blocks = refs('changed', [0, 1, 2]);
    expect((await runStep({ writes: [writeJob(blocks)], fetches: [] }))[0].ok).toBe(true);
    const key = shardKey(ns, blocks[2].digestHex, 0);
    const value = (await plain.get(key))!;
    value[value.length - 100] ^= 0x01;
    await plain.set(key, value);
    const [result] = await runStep({ writes: [], fetches: [writeJob(refs('changed', [0, 1, 2], [10, 11, 12]))] });
    expect(result).toMatchObject({ ok: false, failure: 'value', bytes: 0 });
  });

  it('fails the whole fetch when one of its values is gone', async () => {
    await openTier();
    [0, 1].forEach((id) => fillBlock(id, 'gone'));
    const blocks = refs('gone', [0, 1]);
    await runStep({ writes: [writeJob(blocks)], fetches: [] });
    await plain.del([shardKey(ns, blocks[0].digestHex, 0)]);
    const [result] = await runStep({ writes: [], fetches: [writeJob(refs('gone', [0, 1], [5, 6]))] });
    expect(result).toMatchObject({ ok: false, failure: 'miss' });
  });

  it('copies the blocks out at the start of the step: bytes written to them afterwards do not reach the server', async () => {
    await openTier();
    const image = fillBlock(3, 'early');
    const blocks = refs('early', [3]);
    const job = writeJob(blocks);
    tier.startStep({ writes: [job], fetches: [] });
    // This step's stores may reuse the block at once.
    fillBlock(3, 'overwritten');
    const results: RemoteJobResult[] = [];
    while (results.length === 0) {
      await tier.waitForProgress(50);
      results.push(...tier.collect());
    }
    expect(results[0].ok).toBe(true);
    const [fetched] = await runStep({ writes: [], fetches: [writeJob(refs('early', [3], [7]))] });
    expect(fetched.ok).toBe(true);
    expect(device.readCpuBlock(7).equals(image)).toBe(true);
  });

  it('a write naming a block outside the tier fails the step, and the writes queued before it still complete', async () => {
    await openTier();
    fillBlock(0, 'bad');
    const good = writeJob(refs('bad', [0]));
    const bad = writeJob([{ digestHex: refs('bad', [1])[0].digestHex, cpuBlockId: CPU_BLOCKS + 5 }]);
    expect(() => tier.startStep({ writes: [good, bad], fetches: [] })).toThrow(/blockId/);
    const results: RemoteJobResult[] = [];
    const deadline = Date.now() + 5000;
    while (results.length === 0 && Date.now() < deadline) {
      await tier.waitForProgress(50);
      results.push(...tier.collect());
    }
    expect(results).toEqual([expect.objectContaining({ jobId: good.jobId, ok: true })]);
    expect(tier.pendingCount()).toBe(0);
  });
});
