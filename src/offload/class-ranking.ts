import { blockHashLane, type BlockHash } from '../core/block-hash.js';
import { LaneFilter } from '../core/lane-filter.js';
import type { ReuseDistances } from './reuse-distances.js';
import { NO_SLOT, SlotFifo } from './slot-fifo.js';

/**
 * What the blocks of each kind of request turn out to be worth, learned
 * online, for the class hold policy (class-hold-manager.ts).
 *
 * A request's class is fixed when it is looked up: whether it continues an
 * earlier prompt (its first two looked-up blocks were offered to the tier
 * before) and its length past the GPU hit, in powers of two. A block takes
 * the class of the latest request that looked it up, so the prompt blocks a
 * request then computes and offers carry its class; blocks of its output,
 * never looked up, are of the first class (a first turn of the shortest
 * length) until a later request looks them up. Per class, the blocks offered
 * and those looked up again after their offer are counted (halved as the
 * traffic passes the memory, so the figures follow the workload); a class's
 * worth is their ratio, drawn toward the overall ratio while a class has
 * seen few blocks.
 *
 * With the reuse distances the tier learned (reuse-distances.ts), a block of
 * worth w not reused by age a is reused later with probability
 *     w S(a) / (1 - w + w S(a)),   S(a): the share of reuses later than a,
 * which falls with age within a class: each class's oldest block is its
 * least likely, so a victim is found among one candidate per class.
 */

/** Length classes, by floor(log2(looked-up blocks + 1)): 0, 1-2, 3-6, 7-14, ... 127+ blocks. */
const LENGTH_CLASSES = 8;
/** First turns, then continuations. */
const CLASSES = 2 * LENGTH_CLASSES;
/** Blocks of evidence a class needs before its own ratio counts as much as the overall one. */
const PRIOR_BLOCKS = 64;
/**
 * A store displaces held blocks only of a class whose worth is below the
 * tier's average block by this margin: displacing blocks of about the
 * average's worth throws away the time they were held for nothing.
 */
const DISPLACE_MARGIN = 0.2;

export class ClassRanking {
  /** Class of each held block (by CPU block id). */
  private readonly classOf: Uint8Array;
  /** Each class's blocks on probation, oldest first. */
  private readonly probation: SlotFifo[] = [];
  /** Class of recently looked-up keys, oldest first (a Map keeps insertion order). */
  private readonly keyClass = new Map<BlockHash, number>();
  /**
   * The keys of keyClass: most offered blocks were never looked up (a
   * request's output, or a key forgotten long ago), and this answers them
   * from the lanes the offer just read, without hashing the key's text for
   * the map. Sized to the keys the map holds, not to its memory, and rebuilt
   * larger as they grow: a filter sized for the memory is mostly empty,
   * and reading it is a cache miss per offer.
   */
  private classKnown = new LaneFilter(0);
  private readonly offered = new Float64Array(CLASSES);
  private readonly reused = new Float64Array(CLASSES);
  private offeredTotal = 0;
  private reusedTotal = 0;
  /**
   * The keys of the store being prepared and the class of each, looked up
   * when first needed (a store lists the request's whole chain, of which
   * only the new blocks are offered and admitted); admissions follow them in
   * order.
   */
  private storeKeys: readonly BlockHash[] = [];
  private storeClasses = new Int8Array(64);
  private storeCursor = 0;

  /** `capacity`: the tier's blocks; `memory`: keys (and blocks of traffic) remembered. */
  constructor(
    capacity: number,
    private readonly memory: number,
  ) {
    this.classOf = new Uint8Array(capacity);
    for (let c = 0; c < CLASSES; c++) this.probation.push(new SlotFifo(capacity));
  }

  /** A store of `keys` is being prepared: a key's class is looked up once, for its offer and its admission. */
  storing(keys: readonly BlockHash[]): void {
    if (this.storeClasses.length < keys.length) this.storeClasses = new Int8Array(2 * keys.length);
    this.storeClasses.fill(-1, 0, keys.length);
    this.storeKeys = keys;
    this.storeCursor = 0;
  }

  /** The class of key `i` of the store being prepared. */
  private storeClass(i: number): number {
    let c = this.storeClasses[i];
    if (c < 0) c = this.storeClasses[i] = this.classOfKey(this.storeKeys[i]);
    return c;
  }

  /** Key `i` of the store being prepared is offered for the first time within the memory. */
  offeredNew(i: number): void {
    this.offered[this.storeClass(i)]++;
    if (++this.offeredTotal <= this.memory) return;
    for (let c = 0; c < CLASSES; c++) {
      this.offered[c] /= 2;
      this.reused[c] /= 2;
    }
    this.offeredTotal /= 2;
    this.reusedTotal /= 2;
  }

  /** `key` is looked up for the first time since its offer. */
  reusedKey(key: BlockHash): void {
    const c = this.keyClass.get(key);
    if (c === undefined) return;
    this.reused[c]++;
    this.reusedTotal++;
  }

  /** A request looks up `keys`; `continuing`: it continues a prompt offered before. */
  lookedUp(keys: readonly BlockHash[], continuing: boolean): void {
    const length = Math.min(LENGTH_CLASSES - 1, Math.floor(Math.log2(keys.length + 1)));
    const c = (continuing ? LENGTH_CLASSES : 0) + length;
    for (let i = 0; i < keys.length; i++) {
      // A key keeps its place while its class stays (a request's admission is often tried again); the memory
      // spans several tiers' worth of traffic, so forgetting in order of first sight loses nothing the tier holds.
      const key = keys[i];
      const was = this.keyClass.get(key);
      if (was === c) continue;
      if (was !== undefined) this.keyClass.delete(key);
      else this.classKnown.add(blockHashLane(key, 0), blockHashLane(key, 1));
      this.keyClass.set(key, c);
    }
    while (this.keyClass.size > this.memory) {
      const oldest = this.keyClass.keys().next().value as BlockHash;
      this.keyClass.delete(oldest);
      this.classKnown.remove(blockHashLane(oldest, 0), blockHashLane(oldest, 1));
    }
    if (this.classKnown.outgrownBy(this.keyClass.size)) this.growClassKnown();
  }

  /** Builds the key filter anew for twice the keys the map holds (each key is parsed again, at most once per doubling). */
  private growClassKnown(): void {
    const filter = new LaneFilter(2 * this.keyClass.size);
    for (const key of this.keyClass.keys()) filter.add(blockHashLane(key, 0), blockHashLane(key, 1));
    this.classKnown = filter;
  }

  /** `key` entered the tier at CPU block `id`: a key of the store being prepared, admitted in its order. */
  admitted(key: BlockHash, id: number): void {
    const keys = this.storeKeys;
    while (this.storeCursor < keys.length && keys[this.storeCursor] !== key) this.storeCursor++;
    this.classOf[id] = this.storeCursor < keys.length ? this.storeClass(this.storeCursor) : this.classOfKey(key);
  }

  enteredProbation(id: number): void {
    this.probation[this.classOf[id]].push(id);
  }

  leftProbation(id: number): void {
    this.probation[this.classOf[id]].remove(id);
  }

  clear(): void {
    for (const queue of this.probation) queue.clear();
  }

  /** The share of class `c`'s offered blocks that were looked up again, drawn toward the overall share. */
  worth(c: number): number {
    return (this.reused[c] + PRIOR_BLOCKS * this.overallWorth()) / (this.offered[c] + PRIOR_BLOCKS);
  }

  /** The share of all offered blocks looked up again: an average block's worth. */
  private overallWorth(): number {
    return this.offeredTotal > 0 ? this.reusedTotal / this.offeredTotal : 0;
  }

  /**
   * The probation block at least `hold` old (by `since` and the clock `now`)
   * least likely to be reused, or NO_SLOT when none is free and old enough.
   */
  victim(hold: number, now: number, since: Float64Array, free: (id: number) => boolean, distances: ReuseDistances): number {
    let best = NO_SLOT;
    let bestChance = Infinity;
    for (let c = 0; c < CLASSES; c++) {
      const queue = this.probation[c];
      let id = queue.oldest;
      while (id !== NO_SLOT && !free(id)) id = queue.after(id);
      if (id === NO_SLOT || now - since[id] < hold) continue;
      const w = this.worth(c);
      const later = w * distances.shareLaterThan(now - since[id]);
      const chance = later === 0 ? 0 : later / (1 - w + later);
      if (chance < bestChance) {
        bestChance = chance;
        best = id;
      }
    }
    return best;
  }

  /**
   * The store being prepared would be passed by: when the least worthy class
   * on probation is worth clearly less than the tier's average block, and
   * the store is not of that class itself, takes room from that class's
   * newest blocks (held the least, worth the least) with `take` until
   * `victims` holds `count`. False when it cannot.
   *
   * The store is held to the average rather than to its own class's worth:
   * the classes rank new blocks too weakly for more (on the conversation
   * trace, requiring the store's class to be worth clearly more than the
   * victims' kept 1-2 points fewer hits over eleven windows of 1,000
   * requests). A store of the least worthy class itself would only trade
   * its newest blocks for newer ones of the same worth.
   */
  displace(count: number, victims: number[], free: (id: number) => boolean, take: (id: number) => void): boolean {
    let low = -1;
    let lowWorth = Infinity;
    for (let c = 0; c < CLASSES; c++) {
      if (this.probation[c].size === 0) continue;
      const w = this.worth(c);
      if (w < lowWorth) {
        lowWorth = w;
        low = c;
      }
    }
    // The store's own class is its last block's, which only this request has looked up.
    const incoming = this.storeKeys.length === 0 ? -1 : this.storeClass(this.storeKeys.length - 1);
    if (low < 0 || low === incoming || !(lowWorth * (1 + DISPLACE_MARGIN) < this.overallWorth())) return false;
    const queue = this.probation[low];
    for (let id = queue.newest; id !== NO_SLOT && victims.length < count; id = queue.before(id)) {
      if (free(id)) take(id);
    }
    return victims.length >= count;
  }

  /** The class an offer of `key` counts toward: that of the latest remembered lookup of it, else 0. */
  classOfKey(key: BlockHash): number {
    if (!this.classKnown.mayHave(blockHashLane(key, 0), blockHashLane(key, 1))) return 0;
    return this.keyClass.get(key) ?? 0;
  }
}
