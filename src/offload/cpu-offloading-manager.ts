import type { TierEventSink } from '../events/kv-cache-events.js';
import { blockHashLane, blockHashLanesAreValue, type BlockHash } from '../core/block-hash.js';
import { BlockHashIndex } from '../core/block-hash-index.js';
import { ABSENT } from '../core/lane-hash-table.js';
import { CpuBlockAllocator } from './cpu-block-allocator.js';
import {
  OffloadingManagerError,
  type EvictionPolicy,
  type OffloadingManager,
  type OffloadingManagerStats,
  type PrepareStoreOutput,
  type StoreAdmission,
} from './manager.js';
import { ProtectedKeys } from './protected-keys.js';
import { RefreshedChainIds } from './refreshed-chain-ids.js';
import { RefreshedChainTails } from './refreshed-chain-tails.js';

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
const NO_TOKENS: readonly number[] = Object.freeze([]);

/** Entries the key index is sized for up front; a larger tier grows it as it fills. */
const INITIAL_INDEX_ENTRIES = 1 << 16;

/**
 * The CPU tier's block states and allocation, with the eviction order
 * delegated to an EvictionPolicy (LRU, ARC, LHD, S3-FIFO, hold).
 *
 * The block table is indexed by CPU block id, which is unique among held
 * blocks: a BlockHashIndex from key to id (typed arrays) and typed arrays of
 * per-block state, so the tier's size costs no map entry or object per block;
 * the only per-block reference is the key string, kept to confirm lookups and
 * to name the block in errors.
 */
export class CpuOffloadingManager<P extends EvictionPolicy = EvictionPolicy> implements OffloadingManager {
  private readonly allocator: CpuBlockAllocator;
  /** Key of each held CPU block id; undefined for a free id. */
  private readonly keyById: (BlockHash | undefined)[] = [];
  /** BEING_STORED, 0 (ready) or the number of in-flight loads, per CPU block id. */
  private readonly refCnt: Int32Array;
  /**
   * Per CPU block id: its key's value as the two words a KV event carries (the lanes the index keyed it on),
   * meaningful while keyIsValue is 1 (held, a 16-hex-digit key), so the tier's events need no lookup of the text.
   */
  private readonly keyWords: Int32Array;
  private readonly keyIsValue: Uint8Array;
  /** The words of the keys a completed store reports, grown as stores need. */
  private readiedWords: Int32Array = new Int32Array(16);
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
  private eventSink: TierEventSink | null = null;
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
  /** Ids of the last blocks of the chains refreshed lately, for orders that read only a refresh's tail. */
  private readonly chainTails = new RefreshedChainTails((id) => this.keyById[id]);
  /** Blocks that left the tier so far (evicted, or their store failed): held keys keep their ids while it stands. */
  private blocksLeft = 0;
  private readonly isEvictableId = (id: number): boolean => this.refCnt[id] === 0 && this.storeInputStamp[id] !== this.storeStamp;
  private readonly isEvictable = (key: BlockHash): boolean => {
    const id = this.index.get(key);
    return id !== ABSENT && this.isEvictableId(id);
  };

  constructor(
    options: CpuOffloadingManagerOptions,
    /** The eviction order, readable for its diagnostics (its `state()`); only the manager calls its hooks. */
    readonly policy: P,
  ) {
    this.allocator = new CpuBlockAllocator(options.capacityBlocks);
    this.refCnt = new Int32Array(options.capacityBlocks);
    this.keyWords = new Int32Array(2 * options.capacityBlocks);
    this.keyIsValue = new Uint8Array(options.capacityBlocks);
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
    const ids = this.touchIds;
    // The key before the offered ones usually ended the request's previous refresh.
    const before = from > 0 ? this.chainTails.take(keys[from - 1]) : ABSENT;
    if (before === ABSENT) this.fillIds(keys, first, to, ids);
    else {
      ids[first] = before;
      this.fillIds(keys, from, to, ids);
    }
    this.policy.refreshedChain(keys, ids, first, to);
    if (to > 0) this.chainTails.remember(keys[to - 1], ids[to - 1]);
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
      // The lanes the index just computed: the event words, where they are the value.
      this.keyWords[2 * id] = blockHashLane(key, 0);
      this.keyWords[2 * id + 1] = blockHashLane(key, 1);
      this.keyIsValue[id] = blockHashLanesAreValue(key) ? 1 : 0;
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
    let readied: BlockHash[] | null = null;
    // Whether every readied key's words are held (then the event carries them).
    let wordsHeld = true;
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
        if (this.eventSink !== null) {
          const at = (readied ??= []).push(key) - 1;
          if (this.keyIsValue[id] === 0) wordsHeld = false;
          else this.holdReadiedWords(at, id);
        }
      } else {
        this.forget(key, id);
        this.policy.dropped(key, id);
        this.storesFailed++;
      }
    }
    if (readied !== null) this.eventSink?.stored(readied, null, NO_TOKENS, wordsHeld ? this.readiedWords : undefined);
  }

  /** Puts block `id`'s key words at pair `at` of the completed store's words. */
  private holdReadiedWords(at: number, id: number): void {
    if (this.readiedWords.length < 2 * (at + 1)) {
      const grown = new Int32Array(4 * (at + 1));
      grown.set(this.readiedWords);
      this.readiedWords = grown;
    }
    this.readiedWords[2 * at] = this.keyWords[2 * id];
    this.readiedWords[2 * at + 1] = this.keyWords[2 * id + 1];
  }

  /** The value words of the key held at CPU block `id` as a KV event carries them ([high, low]), or null when none is held there or it is not 16 hex digits. */
  keyWordsOf(id: number): [number, number] | null {
    if (this.keyById[id] === undefined || this.keyIsValue[id] === 0) return null;
    return [this.keyWords[2 * id], this.keyWords[2 * id + 1]];
  }

  setEventSink(sink: TierEventSink | null): void {
    this.eventSink = sink;
  }

  readyKeys(): BlockHash[] {
    const keys: BlockHash[] = [];
    for (let id = 0; id < this.keyById.length; id++) {
      const key = this.keyById[id];
      if (key !== undefined && this.refCnt[id] !== BEING_STORED) keys.push(key);
    }
    return keys;
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
    // Blocks still being stored were never reported ready, so only ready ones are reported gone.
    if (this.eventSink !== null) for (const key of this.readyKeys()) this.eventSink.removed(key);
    this.keyById.length = 0;
    this.keyIsValue.fill(0);
    this.refCnt.fill(0);
    this.index.clear();
    this.chainIds.clear();
    this.chainTails.clear();
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
      const id = ids[i];
      const isValue = this.keyIsValue[id] === 1;
      this.forget(keys[i], id);
      const sink = this.eventSink;
      if (sink === null) continue;
      if (isValue && sink.removedWords !== undefined) sink.removedWords(keys[i], this.keyWords[2 * id], this.keyWords[2 * id + 1]);
      else sink.removed(keys[i]);
    }
    this.policy.evicted(keys, ids);
    this.evictions += keys.length;
  }

  /** Drops a held block (`id`, keyed `key`) from the table and frees its CPU block. */
  private forget(key: BlockHash, id: number): void {
    this.blocksLeft++;
    this.index.delete(key);
    this.keyById[id] = undefined;
    this.keyIsValue[id] = 0;
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
