import type { EngineOptions } from '../runtime/engine.js';
import { setBehaviourSwitches, type BehaviourSwitches } from '../runtime/engine-internals.js';

/**
 * Engine options under which `Engine.create` builds an engine with the given
 * reference behaviours switched off: the tests that show each behaviour is
 * what keeps outputs correct run once as built and once under these.
 */
export function withSwitches(switches: BehaviourSwitches, options: EngineOptions = {}): EngineOptions {
  const marked: EngineOptions = { ...options };
  setBehaviourSwitches(marked, switches);
  return marked;
}
