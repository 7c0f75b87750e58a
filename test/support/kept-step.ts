import type { SimulatedStep } from '../../src/sim/simulated-engine.js';

/**
 * A copy of a step that outlives it: the scheduler refills its step records
 * and updates in place at the next step, and scenarios look back at old steps.
 */
export function kept(step: SimulatedStep): SimulatedStep {
  return {
    scheduled: { ...step.scheduled, requests: step.scheduled.requests.map((r) => ({ ...r })) },
    output: step.output,
    updates: step.updates.map((u) => ({ ...u })),
  };
}
