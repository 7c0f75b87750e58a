import { StoreOnComputePolicy } from './on-compute.js';
import type { OffloadGeometry, StorePolicy } from './store-policy.js';

/**
 * reuse:K: store on compute, but only blocks that came back. The filtering
 * itself is the manager's (ReuseFilterManager counts every key lookups see
 * and declines keys seen fewer than K times); this policy offers blocks the
 * way on-compute does, and a declined block stays below the request's mark,
 * so it is offered again each step until it qualifies or the request ends.
 * The connector factory wraps the manager; this policy only names itself.
 */
export function createReusePolicy(geometry: OffloadGeometry, threshold: number): StorePolicy {
  return new StoreOnComputePolicy(geometry, `reuse:${threshold}`);
}
