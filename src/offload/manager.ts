import type { BlockHash } from '../core/block-hash.js';
import { BlockHashIndex } from '../core/block-hash-index.js';
import { KvtierError } from '../core/errors.js';
import { ABSENT } from '../core/lane-hash-table.js';
import { CpuBlockAllocator } from './cpu-block-allocator.js';
import { ProtectedKeys } from './protected-keys.js';
import { RefreshedChainIds } from './refreshed-chain-ids.js';
import { ERROR_CODES } from '../core/error-codes.js';

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

export interface CpuOffloadingManagerOptions {
  /** Offloaded blocks the CPU tier holds (see cpuTierGeometry). */
  readonly capacityBlocks: number;
  /** Honour `protect`: keep the blocks queued requests will read (default false: `protect` does nothing). */
  readonly protectQueued?: boolean;
}

/** Reference count of a block being stored; ready blocks count their in-flight loads from 0. */
const BEING_STORED = -1;

const NO_KEYS: readonly BlockHash[] = Object.freeze([]);
const NO_IDS: readonly number[] = Object.freeze([]);

/** Entries the key index is sized for up front; a larger tier grows it as it fills. */
const INITIAL_INDEX_ENTRIES = 1 << 16;

/**
 * The CPU tier's block states and allocation, with the eviction order
 * delegated to an EvictionPolicy (LRU, ARC).
 *
 * The block table is indexed by CPU block id, which is unique among held
 * blocks: a BlockHashIndex from key to id (typed arrays) and typed arrays of
 * per-block state, so the tier's size costs no map entry or object per block;
 * the only per-block reference is the key string, kept to confirm lookups and
 * to name the block in errors.
 */
export class CpuOffloadingManager implements OffloadingManager {
  private readonly allocator: CpuBlockAllocator;
  /** Key of each held CPU block id; undefined for a free id. */
  private readonly keyById: (BlockHash | undefined)[] = [];
  /** BEING_STORED, 0 (ready) or the number of in-flight loads, per CPU block id. */
  private readonly refCnt: Int32Array;
  private readonly index: BlockHashIndex;
  private usedBlocks = 0;
  private readonly protectedKeys = new ProtectedKeys((key, isProtected) => {
    if (this.isReady(key)) this.freeUnprotected += isProtected ? -1 : 1;
  });
  private readonly protectQueued: boolean;
  /** With protectQueued: ready, unpinned blocks no queued request protects (what eviction takes first). */
  private freeUnprotected = 0;
  private beingStoredBlocks = 0;
  private pinnedBlocks = 0;
  private lookupHitBlocks = 0;
  private storesAccepted = 0;
  private storesCompleted = 0;
  private storesFailed = 0;
  private storesDeclined = 0;
  private storesRejected = 0;
  private evictions = 0;
  /** Held blocks among the keys of the prepareStore in progress carry its stamp: never its victims. */
  private readonly storeInputStamp: Uint32Array;
  private storeStamp = 0;
  /** CPU block ids of the keys of the touch or refresh in progress (ABSENT when not held). */
  private touchIds = new Int32Array(64);
  /**
   * The keys the latest prepareStore admitted and their ids: a refresh follows its store, so the
   * offered keys it names are found here (confirmed by the key held at the id) rather than looked up.
   */
  private lastStoredKeys: readonly BlockHash[] = NO_KEYS;
  private lastStoredIds: readonly number[] = NO_IDS;
  /** Ids of the chains refreshed lately, so a request's next refresh looks up only its new keys. */
  private readonly chainIds = new RefreshedChainIds(
    (keys, from, to, ids) => this.fillIds(keys, from, to, ids),
    (id) => this.keyById[id],
    () => this.blocksLeft,
  );
  /** Blocks that left the tier so far (evicted, or their store failed): held keys keep their ids while it stands. */
  private blocksLeft = 0;
  private readonly isEvictableId = (id: number): boolean => this.refCnt[id] === 0 && this.storeInputStamp[id] !== this.storeStamp;
  private readonly isEvictable = (key: BlockHash): boolean => {
    const id = this.index.get(key);
    return id !== ABSENT && this.isEvictableId(id);
  };

  constructor(
    options: CpuOffloadingManagerOptions,
    private readonly policy: EvictionPolicy,
  ) {
    this.allocator = new CpuBlockAllocator(options.capacityBlocks);
    this.refCnt = new Int32Array(options.capacityBlocks);
    this.storeInputStamp = new Uint32Array(options.capacityBlocks);
    this.index = new BlockHashIndex((id) => this.keyById[id], Math.min(options.capacityBlocks, INITIAL_INDEX_ENTRIES));
    this.protectQueued = options.protectQueued ?? false;
    policy.attach?.({ idOf: (key) => this.index.get(key), keyOf: (id) => this.keyById[id] as BlockHash });
  }

  lookup(keys: readonly BlockHash[]): number {
    let hits = 0;
    for (let i = 0; i < keys.length; i++) {
      const id = this.index.get(keys[i]);
      if (id === ABSENT || this.refCnt[id] === BEING_STORED) break;
      hits++;
    }
    this.lookupHitBlocks += hits;
    return hits;
  }

  prepareLoad(keys: readonly BlockHash[]): number[] {
    const ids = new Array<number>(keys.length);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      const id = this.index.get(key);
      if (id === ABSENT) {
        throw new OffloadingManagerError(`prepareLoad: key ${key} is not held by the CPU tier`);
      }
      if (this.refCnt[id] === BEING_STORED) {
        throw new OffloadingManagerError(`prepareLoad: key ${key} is still being stored`);
      }
      ids[i] = id;
    }
    for (let i = 0; i < ids.length; i++) {
      if (this.refCnt[ids[i]] === 0) {
        this.pinnedBlocks++;
        if (this.protectQueued && !this.protectedKeys.has(keys[i])) this.freeUnprotected--;
      }
      this.refCnt[ids[i]]++;
    }
    return ids;
  }

  touch(keys: readonly BlockHash[]): void {
    const ids = this.idsOf(keys);
    this.policy.touchedChain?.(keys, ids);
    // Newest last: walking backwards leaves the first key the most recent.
    for (let i = keys.length - 1; i >= 0; i--) {
      const id = ids[i];
      this.policy.touched(keys[i], id === ABSENT ? null : this.refCnt[id] !== BEING_STORED, id);
    }
  }

  refresh(keys: readonly BlockHash[], from: number, to: number): void {
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || from > to || to > keys.length) {
      throw new OffloadingManagerError(`refresh: offered keys [${from}, ${to}) are not within the ${keys.length} keys given`);
    }
    if (this.policy.refreshReadsWholeChain) {
      this.policy.refreshedChain(keys, this.chainIds.idsOf(keys, from, to), 0, to);
      return;
    }
    const first = Math.max(0, from - 1);
    if (to > this.touchIds.length) this.touchIds = new Int32Array(2 * to);
    this.fillIds(keys, first, to, this.touchIds);
    this.policy.refreshedChain(keys, this.touchIds, first, to);
  }

  completeLoad(keys: readonly BlockHash[]): void {
    // Count repeats so a key listed twice must have been pinned twice.
    const unpins = new Map<BlockHash, number>();
    for (const key of keys) unpins.set(key, (unpins.get(key) ?? 0) + 1);
    for (const [key, count] of unpins) {
      const id = this.index.get(key);
      if (id === ABSENT) {
        throw new OffloadingManagerError(`completeLoad: key ${key} is not held by the CPU tier`);
      }
      if (this.refCnt[id] < count) {
        throw new OffloadingManagerError(
          `completeLoad: key ${key} has ${Math.max(this.refCnt[id], 0)} loads in flight, cannot complete ${count}`,
        );
      }
    }
    for (const [key, count] of unpins) {
      const id = this.index.get(key);
      this.refCnt[id] -= count;
      if (this.refCnt[id] === 0) {
        this.pinnedBlocks--;
        if (this.protectQueued && !this.protectedKeys.has(key)) this.freeUnprotected++;
      }
    }
  }

  prepareStore(keys: readonly BlockHash[], admit?: StoreAdmission): PrepareStoreOutput | null {
    const distinct = distinctKeys(keys);
    // Sized when the first key to store is found, filled by index and cut to length: a one-block store
    // (most are) gets a one-entry array rather than one grown for pushes.
    let keysToStore: BlockHash[] | null = null;
    let numToStore = 0;
    let declinedKeys: BlockHash[] | null = null;
    const stamp = this.nextStoreStamp();
    for (let i = 0; i < distinct.length; i++) {
      const key = distinct[i];
      const id = this.index.get(key);
      if (id !== ABSENT) {
        this.storeInputStamp[id] = stamp;
        continue;
      }
      if (admit === undefined || admit(key)) (keysToStore ??= new Array<BlockHash>(distinct.length - i))[numToStore++] = key;
      else (declinedKeys ??= []).push(key);
    }
    if (keysToStore !== null) keysToStore.length = numToStore;
    const declined = declinedKeys ?? NO_KEYS;
    if (keysToStore === null) {
      this.storesDeclined += declined.length;
      return { keysToStore: [], cpuBlockIds: NO_IDS, evictedKeys: NO_KEYS, declinedKeys: declined };
    }

    // Choose every victim before touching anything, so a shortfall changes nothing.
    const shortfall = keysToStore.length - this.allocator.numFree;
    let evictedKeys: readonly BlockHash[] = NO_KEYS;
    if (shortfall > 0) {
      const victims = this.chooseVictims(shortfall, keysToStore, distinct);
      if (victims === null) {
        this.storesRejected++;
        return null;
      }
      evictedKeys = victims;
    }

    const cpuBlockIds = this.allocator.allocate(keysToStore.length);
    for (let i = 0; i < keysToStore.length; i++) {
      const key = keysToStore[i];
      const id = cpuBlockIds[i];
      this.keyById[id] = key;
      this.refCnt[id] = BEING_STORED;
      this.index.add(key, id);
      this.policy.admitted(key, id);
    }
    this.usedBlocks += keysToStore.length;
    this.beingStoredBlocks += keysToStore.length;
    this.storesAccepted += keysToStore.length;
    this.storesDeclined += declined.length;
    this.lastStoredKeys = keysToStore;
    this.lastStoredIds = cpuBlockIds;
    return { keysToStore, cpuBlockIds, evictedKeys, declinedKeys: declined };
  }

  completeStore(keys: readonly BlockHash[], success: boolean): void {
    const distinct = distinctKeys(keys);
    for (let i = 0; i < distinct.length; i++) {
      const key = distinct[i];
      const id = this.index.get(key);
      // Unknown or ready keys are not this store's to complete.
      if (id === ABSENT || this.refCnt[id] !== BEING_STORED) continue;
      this.beingStoredBlocks--;
      if (success) {
        this.refCnt[id] = 0;
        if (this.protectQueued && !this.protectedKeys.has(key)) this.freeUnprotected++;
        this.storesCompleted++;
      } else {
        this.forget(key, id);
        this.policy.dropped(key, id);
        this.storesFailed++;
      }
    }
  }

  get protectsQueued(): boolean {
    return this.protectQueued;
  }

  protect(owner: string, keys: readonly BlockHash[], front = false): void {
    if (this.protectQueued) this.protectedKeys.protect(owner, keys, front);
  }

  release(owner: string): void {
    this.protectedKeys.release(owner);
  }

  reset(): void {
    this.keyById.length = 0;
    this.refCnt.fill(0);
    this.index.clear();
    this.chainIds.clear();
    this.lastStoredKeys = NO_KEYS;
    this.lastStoredIds = NO_IDS;
    this.freeUnprotected = 0;
    this.allocator.reset();
    this.policy.reset();
    this.usedBlocks = 0;
    this.beingStoredBlocks = 0;
    this.pinnedBlocks = 0;
  }

  stats(): OffloadingManagerStats {
    const used = this.usedBlocks;
    return {
      capacityBlocks: this.allocator.capacity,
      usedBlocks: used,
      readyBlocks: used - this.beingStoredBlocks,
      beingStoredBlocks: this.beingStoredBlocks,
      pinnedBlocks: this.pinnedBlocks,
      lookupHitBlocks: this.lookupHitBlocks,
      storesAccepted: this.storesAccepted,
      storesCompleted: this.storesCompleted,
      storesFailed: this.storesFailed,
      storesDeclined: this.storesDeclined,
      storesRejected: this.storesRejected,
      evictions: this.evictions,
    };
  }

  /**
   * Chooses `count` victims for a store of `keysToStore` (of input `inputKeys`, each key once)
   * and evicts them; returns their keys, or null (changing nothing) when
   * there are not enough.
   */
  private chooseVictims(count: number, keysToStore: readonly BlockHash[], inputKeys: readonly BlockHash[]): readonly BlockHash[] | null {
    const policy = this.policy;
    if (policy.chooseVictimIds === undefined) {
      const victims =
        this.protectedKeys.size === 0
          ? policy.chooseVictims(count, this.isEvictable)
          : this.chooseAroundProtected(count, keysToStore, inputKeys, (accept) => policy.chooseVictims(count, (key) => this.isEvictable(key) && accept(key)));
      if (victims === null) return null;
      const ids = new Array<number>(victims.length);
      for (let i = 0; i < victims.length; i++) ids[i] = this.index.get(victims[i]);
      this.evict(victims, ids);
      return victims;
    }
    const ids =
      this.protectedKeys.size === 0
        ? policy.chooseVictimIds(count, this.isEvictableId)
        : this.chooseAroundProtected(count, keysToStore, inputKeys, (accept) =>
            policy.chooseVictimIds?.(count, (id) => this.isEvictableId(id) && accept(this.keyById[id] as BlockHash)) ?? null,
          );
    if (ids === null) return null;
    const victims = new Array<BlockHash>(ids.length);
    for (let i = 0; i < ids.length; i++) victims[i] = this.keyById[ids[i]] as BlockHash;
    this.evict(victims, ids);
    return victims;
  }

  /**
   * Victims when queued requests protect blocks: unprotected blocks first; a
   * protected block goes only for blocks a request nearer the head of the
   * queue will read (never for blocks nobody queued asked for). `choose`
   * asks the policy for victims among evictable blocks whose key `accept` takes.
   */
  private chooseAroundProtected<T>(
    count: number,
    keysToStore: readonly BlockHash[],
    inputKeys: readonly BlockHash[],
    choose: (accept: (key: BlockHash) => boolean) => T[] | null,
  ): T[] | null {
    const protectedKeys = this.protectedKeys;
    // Ask the policy for unprotected victims only when there are enough (a failed choice walks the whole tier);
    // the store's own held keys are not evictable for it.
    let available = this.freeUnprotected;
    for (let i = 0; i < inputKeys.length; i++) if (this.isReady(inputKeys[i]) && !protectedKeys.has(inputKeys[i])) available--;
    if (available >= count) return choose((key) => !protectedKeys.has(key));
    let nearest = Infinity;
    for (const key of keysToStore) nearest = Math.min(nearest, protectedKeys.rankOf(key));
    if (nearest === Infinity) return null;
    return choose((key) => protectedKeys.rankOf(key) > nearest);
  }

  /** The CPU block id of each of `keys` (ABSENT when not held), in a buffer reused by every call. */
  private idsOf(keys: readonly BlockHash[]): Int32Array {
    if (keys.length > this.touchIds.length) this.touchIds = new Int32Array(2 * keys.length);
    const ids = this.touchIds;
    for (let i = 0; i < keys.length; i++) ids[i] = this.index.get(keys[i]);
    return ids;
  }

  /**
   * Fills `ids[from, to)` with the CPU block id of each of `keys[from, to)` (ABSENT when not held), taking
   * the ids of keys the latest prepareStore admitted, in the order it admitted them, without a lookup.
   */
  private fillIds(keys: readonly BlockHash[], from: number, to: number, ids: Int32Array): void {
    const stored = this.lastStoredKeys;
    const storedIds = this.lastStoredIds;
    let next = 0;
    for (let i = from; i < to; i++) {
      const key = keys[i];
      if (next < stored.length && stored[next] === key && this.keyById[storedIds[next]] === key) ids[i] = storedIds[next++];
      else ids[i] = this.index.get(key);
    }
  }

  private nextStoreStamp(): number {
    if (this.storeStamp === 0xffffffff) {
      this.storeInputStamp.fill(0);
      this.storeStamp = 0;
    }
    return ++this.storeStamp;
  }

  /** Whether `key` is held, stored and not pinned by a load (refCnt 0). */
  private isReady(key: BlockHash): boolean {
    const id = this.index.get(key);
    return id !== ABSENT && this.refCnt[id] === 0;
  }

  /** Evicts `keys`, held at CPU blocks `ids`. */
  private evict(keys: readonly BlockHash[], ids: readonly number[]): void {
    for (let i = 0; i < keys.length; i++) {
      if (this.protectQueued && !this.protectedKeys.has(keys[i])) this.freeUnprotected--;
      this.forget(keys[i], ids[i]);
    }
    this.policy.evicted(keys, ids);
    this.evictions += keys.length;
  }

  /** Drops a held block (`id`, keyed `key`) from the table and frees its CPU block. */
  private forget(key: BlockHash, id: number): void {
    this.blocksLeft++;
    this.index.delete(key);
    this.keyById[id] = undefined;
    this.refCnt[id] = 0;
    this.usedBlocks--;
    this.allocator.free(id);
  }
}

/**
 * `keys` with repeats dropped, first occurrence kept, as an array walked by
 * index (iterating "a Set or an array" allocated iterator objects per call).
 * Most stores are one block (a decode step completed it): no set for them.
 */
function distinctKeys(keys: readonly BlockHash[]): readonly BlockHash[] {
  return keys.length > 1 ? [...new Set(keys)] : keys;
}
