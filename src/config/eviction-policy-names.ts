/**
 * Every CPU-tier eviction policy a config may name: 'lru', 'arc', 'lhd'
 * (least hit density over the prefix tree, hit-density-manager.ts) and
 * 's3fifo' (S3-FIFO over the prefix tree, s3fifo-manager.ts) and 'hold'
 * (holds a share of the blocks as long as their reuse takes, hold-manager.ts)
 * and 'classhold' (hold, choosing that share by what each kind of request's
 * blocks turned out to be worth, class-hold-manager.ts); 'lru+queue',
 * 's3fifo+queue', 'hold+queue' and 'classhold+queue' are those orders keeping
 * the blocks that queued requests will read (protected-keys.ts).
 */
export const EVICTION_POLICY_NAMES = ['lru', 'arc', 'lhd', 's3fifo', 'hold', 'classhold', 'lru+queue', 's3fifo+queue', 'hold+queue', 'classhold+queue'] as const;

export type EvictionPolicyName = (typeof EVICTION_POLICY_NAMES)[number];

/** The suffix of a policy that keeps the blocks queued requests will read. */
export const QUEUE_PROTECTION_SUFFIX = '+queue';
