/**
 * Every CPU-tier eviction policy a config may name: 'lru', 'arc', 'lhd'
 * (least hit density over the prefix tree, hit-density-manager.ts) and
 * 's3fifo' (S3-FIFO over the prefix tree, s3fifo-manager.ts).
 */
export const EVICTION_POLICY_NAMES = ['lru', 'arc', 'lhd', 's3fifo'] as const;

export type EvictionPolicyName = (typeof EVICTION_POLICY_NAMES)[number];
