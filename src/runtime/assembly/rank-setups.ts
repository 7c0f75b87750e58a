import type { KvGeometry } from '../../core/kv-geometry.js';
import type { WorkerConnectorSwitches } from '../../connector/worker-connector-switches.js';
import type { BackendName, CopyMethod } from '../../device/types.js';
import { rulesForRank, type FaultPlan } from '../../faults/plan.js';
import type { RankSetup } from '../../rank/rank-protocol.js';
import type { HostLinkProfile } from '../../timing/gpu-profiles.js';
import type { RankTierSetup } from './tier-stack.js';

/** How every rank opens its device. */
export interface RankDeviceConfig {
  readonly backend: BackendName;
  readonly copyMethod?: CopyMethod;
  /** Host backend: the GPU host link its transfers are held to. */
  readonly hostLink?: HostLinkProfile;
  /** Ranks report each step's forward and copy jobs as their device timed them (RankInit.deviceTrace). */
  readonly deviceTrace?: boolean;
}

/** One setup per rank: the same geometry, devices and tiers, each rank with its own fault rules. */
export function rankSetups(
  geometry: KvGeometry,
  numGpuBlocks: number,
  device: RankDeviceConfig,
  tiers: RankTierSetup,
  faults: FaultPlan,
  switches?: WorkerConnectorSwitches,
): RankSetup[] {
  const setups: RankSetup[] = [];
  for (let rank = 0; rank < geometry.tp; rank++) {
    setups.push({
      rank,
      geometry,
      backend: device.backend,
      numGpuBlocks,
      numCpuBlocks: tiers.numCpuBlocks,
      ...(device.copyMethod === undefined ? {} : { copyMethod: device.copyMethod }),
      ...(device.hostLink === undefined ? {} : { hostLink: device.hostLink }),
      ...(device.deviceTrace === true ? { deviceTrace: true } : {}),
      faultRules: rulesForRank(faults, rank),
      faultSeed: faults.seed,
      ...(switches === undefined ? {} : { testSwitches: switches }),
      ...(tiers.remote === undefined ? {} : { remote: tiers.remote }),
    });
  }
  return setups;
}
