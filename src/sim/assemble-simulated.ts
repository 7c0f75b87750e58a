import type { KvGeometry } from '../core/kv-geometry.js';
import { assembleLocalEngine, type AssemblyConfig, type AssemblyOptions, type EngineAssembly } from '../runtime/assembly/assemble-engine.js';
import { SimulatedEngine } from './simulated-engine.js';
import { SimulatedRanks, type SimulatedRanksOptions } from './simulated-ranks.js';

/** The simulator's own knobs: transfer latencies, injected load failures, a modelled link, shared position sums. */
export type SimulationOptions = Omit<SimulatedRanksOptions, 'setups' | 'aggregator'>;

/** What a simulated engine is built from: the assembly's config, with the devices simulated and no remote tier. */
export type SimulatedAssemblyConfig = Omit<AssemblyConfig, 'device' | 'remote'>;

/** A simulated engine and the parts the assembly built it from. */
export interface SimulatedAssembly extends EngineAssembly<SimulatedRanks> {
  readonly engine: SimulatedEngine;
}

/**
 * Builds an engine through the same assembly as Engine.create, with the
 * ranks as production RankWorkers over simulated devices in this thread
 * (SimulatedRanks) instead of rank threads over the native addon.
 */
export function assembleSimulatedEngine(
  geometry: KvGeometry,
  config: SimulatedAssemblyConfig,
  options: AssemblyOptions<SimulatedRanks> = {},
  simulation: SimulationOptions = {},
): SimulatedAssembly {
  const parts = assembleLocalEngine(geometry, { ...config, remote: null, device: { backend: 'host' } }, options, {
    start: (setups, aggregator) => new SimulatedRanks({ ...simulation, setups, aggregator }),
  });
  return { ...parts, engine: new SimulatedEngine(parts.scheduler, parts.ranks, parts.observer) };
}
