import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFaultPlan } from '../../src/faults/plan.js';
import { RemoteTierConnector } from '../../src/remote/remote-connector.js';
import { assembleEngine, type RankStarter } from '../../src/runtime/assembly/assemble-engine.js';
import { engineAssemblyConfig, engineGeometry } from '../../src/runtime/assembly/engine-config-parts.js';
import { resolveEngineConfig } from '../../src/runtime/engine-config.js';
import type { EngineConfigInput } from '../../src/runtime/engine-types.js';
import type { RankSetup } from '../../src/rank/rank-protocol.js';
import { haveRedis, noteRedisSkip, startRedis, type RedisServer } from '../support/redis-server.js';

noteRedisSkip('the assembly tests with a remote tier');

/**
 * A TCP relay in front of a server that counts the connections through it,
 * so a test can wait for every connection a client opened to be closed.
 */
interface CountingRelay {
  readonly url: string;
  /** Connections opened through the relay so far. */
  readonly opened: () => number;
  /** Settles once no connection through the relay is open any more. */
  allClosed(): Promise<void>;
  close(): Promise<void>;
}

async function countingRelay(targetPort: number): Promise<CountingRelay> {
  const open = new Set<Socket>();
  let opened = 0;
  let waiters: (() => void)[] = [];
  const settle = () => {
    if (open.size > 0) return;
    for (const resolve of waiters) resolve();
    waiters = [];
  };
  const server: Server = createServer((client) => {
    opened += 1;
    open.add(client);
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      settle();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    opened: () => opened,
    allClosed: () =>
      new Promise<void>((resolve) => {
        waiters.push(resolve);
        settle();
      }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** An engine config with a CPU tier and a remote tier at `url`, on two ranks. */
function remoteEngine(url: string): EngineConfigInput {
  return { tp: 2, gpuBlocks: 32, cpuBlocks: 64, remote: url, remoteTimeoutMs: 500 };
}

/** Ranks that never start: the step after the remote tier was opened fails. */
function failingRanks(seen: RankSetup[][]): RankStarter<never> {
  return {
    start: async (setups) => {
      seen.push([...setups]);
      throw new Error('no rank could start');
    },
    stop: async () => undefined,
  };
}

/** Ranks that start as plain values: what the assembly gave them. */
const recordedRanks: RankStarter<readonly RankSetup[]> = { start: async (setups) => setups, stop: async () => undefined };

async function assemble<R>(input: EngineConfigInput, ranks: RankStarter<R>) {
  const config = resolveEngineConfig(input);
  return assembleEngine(engineGeometry(config), engineAssemblyConfig(config, 'host', parseFaultPlan(''), null), {}, ranks);
}

describe.skipIf(!haveRedis)('the engine assembly with a remote tier', () => {
  let redis: RedisServer;

  beforeAll(async () => {
    redis = await startRedis();
  });

  afterAll(async () => {
    await redis?.stop();
  });

  it('closes the remote connection it opened when the ranks fail to start', async () => {
    const relay = await countingRelay(redis.port);
    try {
      const seen: RankSetup[][] = [];
      await expect(assemble(remoteEngine(relay.url), failingRanks(seen))).rejects.toThrow('no rank could start');
      // The ranks were asked to start, so the remote tier had been opened: its connection went through the relay.
      expect(seen).toHaveLength(1);
      expect(relay.opened()).toBeGreaterThan(0);
      await relay.allClosed();
    } finally {
      await relay.close();
    }
  });

  it('hands the scheduler the remote tier composed over the CPU tier, and every rank the same geometry and remote setup', async () => {
    const parts = await assemble(remoteEngine(redis.url), recordedRanks);
    try {
      expect(parts.connector).toBeInstanceOf(RemoteTierConnector);
      expect(parts.connector).toBe(parts.tiers.remote);
      expect(parts.ranks.map((s) => s.rank)).toEqual([0, 1]);
      for (const setup of parts.ranks) {
        expect(setup.geometry).toBe(parts.geometry);
        expect(setup.numCpuBlocks).toBe(64);
        expect(setup.remote?.namespace).toBe(parts.ranks[0].remote?.namespace);
      }
    } finally {
      await parts.close();
    }
  });
});

describe('the engine assembly without a remote tier', () => {
  it('builds one setup per rank over one geometry, and the CPU tier the scheduler talks to', async () => {
    const parts = await assemble({ tp: 2, gpuBlocks: 32, cpuBlocks: 16, offloadFactor: 2 }, recordedRanks);
    expect(parts.geometry).toMatchObject({ tp: 2, blockSize: 16, offloadFactor: 2, offloadedBlockTokens: 32 });
    expect(parts.connector).toBe(parts.tiers.offloading?.connector);
    expect(parts.ranks.map((s) => [s.rank, s.geometry === parts.geometry, s.numGpuBlocks, s.numCpuBlocks, s.remote])).toEqual([
      [0, true, 32, 16, undefined],
      [1, true, 32, 16, undefined],
    ]);
    await parts.close();
  });

  it('checks the fault plan against the geometry before it opens anything', async () => {
    const config = resolveEngineConfig({ tp: 2, gpuBlocks: 32 });
    const started: unknown[] = [];
    const ranks: RankStarter<void> = { start: async (setups) => void started.push(setups), stop: async () => undefined };
    await expect(
      assembleEngine(engineGeometry(config), engineAssemblyConfig(config, 'host', parseFaultPlan('crash:rank=5,step=1'), null), {}, ranks),
    ).rejects.toThrow(/rank/);
    expect(started).toEqual([]);
  });
});
