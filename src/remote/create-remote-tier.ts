import type { KvGeometry } from '../core/kv-geometry.js';
import type { OffloadingSetup } from '../connector/create-connector.js';
import type { OffloadingManager } from '../offload/manager.js';
import { RemoteTierConnector } from './remote-connector.js';
import type { RemoteRankInit, RemoteTestSwitches } from '../protocol/remote-jobs.js';
import { remoteNamespace, type RemoteNamespace } from './remote-keys.js';
import type { RemoteTierSettings } from './remote-settings.js';
import { probeRemote, RemoteStore } from './remote-store.js';
import { CpuTierTrackingManager } from './tracking-manager.js';
import { authKeysOf } from './value-auth.js';
import { routeClientWarnings } from './client-warnings.js';
import type { EngineLogger } from '../log/engine-events.js';
import type { RemoteFaults } from './remote-faults.js';

/** Blocks of remote writes one rank keeps in flight; more are dropped and counted. */
const MAX_WRITE_BLOCKS_IN_FLIGHT_PER_RANK = 1024;
/** Write jobs the scheduler side keeps in flight; more are dropped and counted. */
const MAX_WRITE_JOBS_IN_FLIGHT = 512;

/**
 * A remote tier being set up: the server was reached (so an unreachable one
 * stops the engine before any rank starts), the CPU tier's manager is to be
 * wrapped by `wrapManager`, and `attach` builds the connector over the CPU
 * tier's.
 */
export interface RemoteTierPlan {
  readonly namespace: RemoteNamespace;
  readonly rankInit: RemoteRankInit;
  wrapManager(manager: OffloadingManager): OffloadingManager;
  attach(offloading: OffloadingSetup): RemoteTierConnector;
  /** Closes the connection when the engine does not start after all. */
  abandon(): Promise<void>;
}

/** Reaches the server (throws RemoteUnavailableError naming the masked URL) and plans the tier. */
export async function planRemoteTier(
  settings: RemoteTierSettings,
  geometry: KvGeometry,
  switches: RemoteTestSwitches = {},
  faults: RemoteFaults | null = null,
  logger: EngineLogger | null = null,
): Promise<RemoteTierPlan> {
  // The ranks' connections would print the same warnings again; they drop them (rank-remote.ts).
  routeClientWarnings((message) => logger?.warn({ event: 'remote_client_warning', url: settings.address.masked }, `remote tier: ${message}`));
  const { cluster } = await probeRemote(settings.address, settings.timeoutMs);
  const useCluster = cluster && !switches.ignoreCluster;
  const namespace = remoteNamespace({ namespace: settings.namespace, ...geometry }, settings.secret, settings.encrypt ? 'encrypt' : 'mac');
  const store = new RemoteStore({ address: settings.address, timeoutMs: settings.timeoutMs, cluster: useCluster });
  await store.connect();
  let tracking: CpuTierTrackingManager | null = null;
  return {
    namespace,
    rankInit: {
      url: settings.url,
      cluster: useCluster,
      timeoutMs: settings.timeoutMs,
      namespace: namespace.name,
      namespaceDigestHex: namespace.digest.toString('hex'),
      blockTokens: namespace.blockTokens,
      maxInFlightWrites: MAX_WRITE_BLOCKS_IN_FLIGHT_PER_RANK,
      retry: settings.retry,
      auth: namespace.auth ? authKeysOf(namespace.auth) : null,
      testSwitches: switches,
    },
    wrapManager(manager) {
      tracking = new CpuTierTrackingManager(manager);
      return tracking;
    },
    attach(offloading) {
      if (tracking === null) throw new Error('planRemoteTier: the CPU tier was built without wrapManager');
      return new RemoteTierConnector({
        inner: offloading.connector,
        manager: tracking,
        store,
        namespace,
        policy: settings.policy,
        maxWriteJobsInFlight: MAX_WRITE_JOBS_IN_FLIGHT,
        retry: settings.retry,
        testSwitches: switches,
        faults,
      });
    },
    abandon: () => store.close(),
  };
}
