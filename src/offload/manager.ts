import type { BlockHash } from '../core/block-hash.js';
import { KvtierError } from '../core/errors.js';
import { ERROR_CODES } from '../core/error-codes.js';
import type { TierEventSink } from '../events/kv-cache-events.js';

/**
 * The OffloadingManager (docs/architecture.md, "Offloading"): the scheduler side's record of
 * which offloaded blocks the CPU tier holds, where, and in which state. It
 * moves no bytes; the connector turns its answers into transfer jobs.
 *
 * Keys are BlockHash strings: an offloaded block is `offloadFactor`
 * consecutive GPU blocks keyed by the chained hash of its last GPU block
 * (see `offloadKeys` in geometry.ts). The manager never interprets them.
 *
 * A block is in one of three states:
 * - being stored: its store job is in flight. Not loadable, not evictable.
 * - ready: loadable and evictable.
 * - being loaded: ready and pinned by one or more in-flight loads. Loadable,
 *   not evictable.
 *
 * Calling protocol for a connector:
 * - Admission: `touch(keys)` then `lookup(keys)`; on a hit, `prepareLoad` the
 *   hit keys, and `completeLoad` the same keys when the load job finished on
 *   every rank (whether it succeeded or not: the CPU copy is still intact).
 * - Stores: `prepareStore(keys)`; write `keysToStore` to `cpuBlockIds`; when
 *   the job finished on every rank, `completeStore(keysToStore, ok)` with
 *   exactly the keys that job wrote (never keys another job is writing).
 *   When a request's store stored anything, `refresh` its chain up to the
 *   last block offered.
 * - A null from `prepareStore` means "no room now": nothing changed; try
 *   again later.
 */
export interface OffloadingManager {
  /**
   * How many of `keys`, from the start, are held and ready, or null for "not
   * now, ask again later" (the LRU and ARC managers always answer a number).
   */
  lookup(keys: readonly BlockHash[]): number | null;

  /**
   * Pins `keys` for a load and returns their CPU block ids in input order.
   * Every key must be held and ready; otherwise nothing is pinned and an
   * OffloadingManagerError names the first offending key.
   */
  prepareLoad(keys: readonly BlockHash[]): number[];

  /** Marks `keys` as used now; the first key ends up the most recent. Unknown keys are ignored. */
  touch(keys: readonly BlockHash[]): void;

  /**
   * A request stored blocks at the end of its chain `keys[0, to)`: its
   * offloaded keys from its first block to the last one offered, first block
   * first, the store having offered `keys[from, to)` (keys after `to` are
   * ignored, so a caller may pass a longer array it already has). The chain
   * is in use, but none of its blocks was reused: recency orders make it the
   * newest, its first key the most recent, so the chain is evicted from its
   * tail and what stays is still a prefix; prefix-aware orders learn the
   * parent (the key before it) of each offered key, which a block computed
   * after its request's admission was never shown with. Unknown keys are
   * ignored. The keys are read during the call only.
   */
  refresh(keys: readonly BlockHash[], from: number, to: number): void;

  /** Unpins keys pinned by `prepareLoad`. Throws, changing nothing, for a key not pinned. */
  completeLoad(keys: readonly BlockHash[]): void;

  /**
   * Reserves CPU blocks for the keys of `keys` the tier does not hold yet
   * (keys held in any state are skipped; duplicates count once). When room
   * is short it evicts ready, unpinned blocks, oldest first by the eviction
   * policy, never one of `keys`. Evicted blocks are freed at once.
   *
   * `admit`, when given, decides per absent key whether it is worth storing;
   * a declined key is not stored and is listed in `declinedKeys`.
   *
   * Returns null, changing nothing, when not enough blocks can be evicted.
   * Nothing to store gives an empty output, not null. New blocks start as
   * being stored.
   */
  prepareStore(keys: readonly BlockHash[], admit?: StoreAdmission): PrepareStoreOutput | null;

  /**
   * Ends the store of `keys` (the `keysToStore` of one `prepareStore`).
   * Success: each block being stored becomes ready.
   * Failure: each block being stored is freed and forgotten. Ready blocks are
   * untouched either way, unknown keys are ignored, and evictions the store
   * caused stay done.
   */
  completeStore(keys: readonly BlockHash[], success: boolean): void;

  /**
   * Optional: `owner`, a request joining the back of the waiting queue (or
   * with `front` its head), will look up `keys` when admitted. Eviction
   * passes over them; one goes only to make room for blocks a request nearer
   * the head will read. Replaces what `owner` protected before.
   */
  protect?(owner: string, keys: readonly BlockHash[], front?: boolean): void;

  /**
   * Optional: false when `protect` does nothing (a policy without queue
   * protection), so callers need not build the keys. Absent counts as true.
   */
  readonly protectsQueued?: boolean;

  /** Optional: ends what `protect` did for `owner` (admitted, finished). Unknown owners are ignored. */
  release?(owner: string): void;

  /**
   * Forgets every block (a rank's CPU shard was lost, so every rank must treat
   * the whole tier as lost); the next ids handed out start from 0 again. Completions of loads or stores
   * prepared before the reset must be dropped by the caller, not forwarded:
   * their keys may name new blocks by then.
   */
  reset(): void;

  stats(): OffloadingManagerStats;

  /**
   * Optional: where blocks becoming ready (a store completed) and leaving the
   * tier (evicted, reset) are reported (KV events); null stops reporting.
   */
  setEventSink?(sink: TierEventSink | null): void;

  /** Optional: the keys of the blocks held ready (loadable, pinned ones included), in CPU block id order. */
  readyKeys?(): BlockHash[];
}

/** Decides whether an absent key is worth storing (e.g. a reuse filter). */
export type StoreAdmission = (key: BlockHash) => boolean;

export interface PrepareStoreOutput {
  /** The keys to write now, in input order. */
  readonly keysToStore: readonly BlockHash[];
  /** The CPU block id of each key of `keysToStore`, in the same order. */
  readonly cpuBlockIds: readonly number[];
  /** Blocks evicted to make room, in eviction order; already freed. */
  readonly evictedKeys: readonly BlockHash[];
  /** Absent keys the admission declined: neither held nor stored now. */
  readonly declinedKeys: readonly BlockHash[];
}

export interface OffloadingManagerStats {
  readonly capacityBlocks: number;
  /** Blocks held in any state. */
  readonly usedBlocks: number;
  /** Loadable blocks, pinned ones included. */
  readonly readyBlocks: number;
  readonly beingStoredBlocks: number;
  /** Ready blocks with at least one load in flight. */
  readonly pinnedBlocks: number;
  /** Blocks that lookups reported as hits, summed over lookups. */
  readonly lookupHitBlocks: number;
  /** Blocks `prepareStore` reserved. */
  readonly storesAccepted: number;
  readonly storesCompleted: number;
  readonly storesFailed: number;
  /** Absent blocks an admission filter declined. */
  readonly storesDeclined: number;
  /** `prepareStore` calls answered null (no room). */
  readonly storesRejected: number;
  readonly evictions: number;
}

/** An OffloadingManager was called out of protocol (loading an absent block, unpinning twice...). */
export class OffloadingManagerError extends KvtierError {
  constructor(message: string) {
    super(ERROR_CODES.offloadManager, message);
  }
}

/**
 * The tier's held blocks as a policy may address them: by key or by CPU
 * block id (unique among held blocks, below the capacity).
 */
export interface TierSlots {
  /** The CPU block id holding `key`, or ABSENT. */
  idOf(key: BlockHash): number;
  /** The key of held CPU block `id`. */
  keyOf(id: number): BlockHash;
}

/**
 * The ordering half of a manager: which blocks go first when room is needed.
 * The block states live in CpuOffloadingManager; a policy sees keys and,
 * for policies that keep their order in arrays by block, the CPU block id
 * of each held key (so it never looks a key up again).
 */
export interface EvictionPolicy {
  /** Optional: called once by the manager, before any other call, with its view of the held blocks. */
  attach?(slots: TierSlots): void;
  /** A new block entered the tier (it is being stored) at CPU block `id`. */
  admitted(key: BlockHash, id: number): void;
  /** `key` was touched; `ready` is null (and `id` ABSENT) when the tier holds no block for it. */
  touched(key: BlockHash, ready: boolean | null, id: number): void;
  /**
   * Optional: the keys of one `touch`, in input order, before their `touched`
   * calls, with `ids[i]` the CPU block id of `keys[i]` or ABSENT (valid
   * during the call only). The connector touches a prompt's keys first
   * block first, so a policy may read each key's parent from it
   * (prefix-aware policies).
   */
  touchedChain?(keys: readonly BlockHash[], ids: ArrayLike<number>): void;
  /**
   * Whether `refreshedChain` reads a whole refreshed chain (a recency order
   * moves every block of it) or only its offered keys and the one before
   * them (a prefix-aware order learns their parents; it learned the others'
   * when they were stored), which keeps a long chain's refresh cheap.
   */
  readonly refreshReadsWholeChain: boolean;
  /**
   * A request's chain `keys[0, to)` was refreshed (`OffloadingManager.refresh`),
   * first block first; the policy reads `keys[from, to)` (from 0, or from the
   * key before the first offered one), with `ids[i]` the CPU block id of
   * `keys[i]` or ABSENT (valid during the call only). Not a reuse: a policy
   * counting reuses (ARC's T2, S3-FIFO's main FIFO, LHD's hits) must not
   * count this.
   */
  refreshedChain(keys: readonly BlockHash[], ids: ArrayLike<number>, from: number, to: number): void;
  /**
   * The `count` blocks to evict next, in eviction order, among the keys
   * `evictable` accepts, or null when there are fewer. Must change nothing:
   * `evicted` applies the choice.
   */
  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null;
  /**
   * Optional, preferred over `chooseVictims` when present: the same choice
   * as CPU block ids, `evictable` taking ids.
   */
  chooseVictimIds?(count: number, evictable: (id: number) => boolean): number[] | null;
  /** The blocks the choice returned were evicted, in that order: `keys[i]` was at CPU block `ids[i]`. */
  evicted(keys: readonly BlockHash[], ids: readonly number[]): void;
  /** A block (`key` at CPU block `id`) left without being evicted (its store failed): keep no history of it. */
  dropped(key: BlockHash, id: number): void;
  /** Every block left the tier. */
  reset(): void;
}
