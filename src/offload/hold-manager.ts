import type { BlockHash } from '../core/block-hash.js';
import { ABSENT } from '../core/lane-hash-table.js';
import { ClassRanking } from './class-ranking.js';
import { CpuOffloadingManager, type CpuOffloadingManagerOptions } from './cpu-offloading-manager.js';
import type { EvictionPolicy, PrepareStoreOutput, StoreAdmission, TierSlots } from './manager.js';
import { OfferHistory } from './offer-history.js';
import { RecentKeys } from './recent-keys.js';
import { ReuseDistances } from './reuse-distances.js';
import { NO_SLOT, SlotFifo } from './slot-fifo.js';
import { SlotPrefixTree } from './slot-prefix-tree.js';
import { VictimChoice } from './victim-choice.js';

/**
 * Hold: keep a share of the stored blocks for as long as their reuse takes,
 * passing other stores by meanwhile, and keep reused blocks first.
 *
 * Most conversation turns are continued, if at all, only after far more
 * traffic than a tier holds, and nothing tells at store time which will be.
 * A tier that keeps everything it stores (LRU, FIFO) then drops each block
 * before its reuse comes. This policy learns how far apart, in the tier's
 * traffic, a block's offer and its first lookup are (reuse-distances.ts),
 * and when those distances exceed the tier's size it holds the blocks it
 * has for the hold time that hits the most, refusing stores (the caller
 * passes them by) until its oldest new blocks are that old.
 *
 * Two queues over the tier's CPU block ids:
 * - probation: blocks not looked up since they were stored, oldest first.
 *   They go first while probation holds over a tenth of the tier, but only
 *   once older than the hold time.
 * - kept: blocks an admission touched while held, and blocks stored again
 *   after a lookup soon after their offer (a continuation that found its
 *   prefix gone), least recently used first. A reused block is reused again more often, and
 *   sooner, than a new one. A store that brings such a block back is never
 *   refused.
 *
 * Orphans (their parent left) go before anything, and every victim is the
 * deepest held block under the one the queues chose, so a chain is cut from
 * its tail and never left without its head.
 */

/** Probation's share of the tier past which its blocks go first. */
const PROBATION_SHARE = 0.1;
/** A block looked up within this many tier capacities of traffic after its offer is kept when stored again. */
const BRING_BACK_CAPACITIES = 4;
/** Distances are measured up to this many tier capacities of traffic, within [MIN_HORIZON, MAX_HORIZON] blocks. */
const HORIZON_CAPACITIES = 8;
const MIN_HORIZON = 65_536;
/** The offer history holds a key per block of the horizon: bounded for the largest tiers. */
const MAX_HORIZON = 1 << 22;

const IN_NONE = 0;
const IN_PROBATION = 1;
const IN_KEPT = 2;

export interface HoldState {
  /** Probation, oldest first. */
  readonly probation: readonly BlockHash[];
  /** Kept blocks, least recently used first. */
  readonly kept: readonly BlockHash[];
  /** Blocks of traffic a new block is held before it may go (0: no hold). */
  readonly holdTime: number;
}

const NO_SLOTS: TierSlots = {
  idOf: () => ABSENT,
  keyOf: (id) => {
    throw new RangeError(`hold policy used before a manager attached it (block id ${id})`);
  },
};

export class HoldEvictionPolicy implements EvictionPolicy {
  private readonly probation: SlotFifo;
  private readonly kept: SlotFifo;
  private readonly queueOf: Uint8Array;
  /** Traffic clock when each block entered the tier or was last looked up. */
  private readonly since: Float64Array;
  private readonly tree: SlotPrefixTree;
  private readonly history: OfferHistory;
  private readonly distances: ReuseDistances;
  /** Keys looked up soon after their offer: stored again (a lookup found them gone), they are kept. */
  private readonly missed: RecentKeys;
  private readonly probationTarget: number;
  private readonly bringBackAge: number;
  private slots: TierSlots = NO_SLOTS;
  /** The store being prepared brings a missed block back: never refuse it. */
  private bringsBack = false;
  private readonly choice: VictimChoice;
  private readonly isFree: (id: number) => boolean;
  /** Ranks probation by what each class of blocks was worth (class-hold-manager.ts); null: oldest first. */
  private readonly ranking: ClassRanking | null;

  /** `ranked`: evict probation by class worth and let worthier stores displace (the class hold policy). */
  constructor(
    private readonly capacity: number,
    ranked = false,
  ) {
    this.probation = new SlotFifo(capacity);
    this.kept = new SlotFifo(capacity);
    this.queueOf = new Uint8Array(capacity);
    this.since = new Float64Array(capacity);
    this.choice = new VictimChoice(capacity);
    this.isFree = this.choice.isFree;
    const horizon = Math.min(MAX_HORIZON, Math.max(MIN_HORIZON, HORIZON_CAPACITIES * capacity));
    this.history = new OfferHistory(horizon);
    this.distances = new ReuseDistances(capacity, horizon);
    this.bringBackAge = BRING_BACK_CAPACITIES * capacity;
    this.missed = new RecentKeys(Math.max(1, BRING_BACK_CAPACITIES * capacity));
    this.ranking = ranked ? new ClassRanking(capacity, horizon) : null;
    this.probationTarget = Math.floor(capacity * PROBATION_SHARE);
    this.tree = new SlotPrefixTree(capacity, Math.max(MIN_HORIZON, 4 * capacity), {
      idOf: (key) => this.slots.idOf(key),
      keyOf: (id) => this.slots.keyOf(id),
    });
  }

  attach(slots: TierSlots): void {
    this.slots = slots;
  }

  /** `keys` are offered for storing (before the manager chooses room for them). */
  offering(keys: readonly BlockHash[]): void {
    this.bringsBack = false;
    const ranking = this.ranking;
    ranking?.storing(keys);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (this.history.offered(key) && ranking !== null) ranking.offeredNew(i);
      if (!this.bringsBack && this.missed.size > 0 && this.missed.has(key)) this.bringsBack = true;
    }
  }

  /**
   * `keys` are looked up (past the GPU prefix hit): first lookups after an
   * offer measure reuse distances, and a block looked up soon after its
   * offer is kept if it is ever stored again.
   */
  lookingUp(keys: readonly BlockHash[]): void {
    for (let i = 0; i < keys.length; i++) {
      const distance = this.history.firstLookup(keys[i]);
      if (distance < 0) continue;
      this.ranking?.reusedKey(keys[i]);
      this.distances.observe(distance, this.history.now);
      if (distance <= this.bringBackAge) this.missed.add(keys[i]);
    }
    // A prompt whose first blocks were offered before continues an earlier one (one block may be a shared preamble).
    this.ranking?.lookedUp(keys, keys.length >= 2 && this.history.age(keys[0]) >= 0 && this.history.age(keys[1]) >= 0);
  }

  admitted(key: BlockHash, id: number): void {
    this.since[id] = this.history.now;
    this.ranking?.admitted(key, id);
    this.tree.added(key, id);
    if (this.missed.size > 0 && this.missed.delete(key)) this.pushKept(id);
    else {
      this.queueOf[id] = IN_PROBATION;
      this.probation.push(id);
      this.ranking?.enteredProbation(id);
    }
  }

  readonly refreshReadsWholeChain = false;

  /** A store extending its request's chain is no reuse: only the tree learns the offered blocks' parents. */
  refreshedChain(keys: readonly BlockHash[], ids: ArrayLike<number>, from: number, to: number): void {
    this.tree.sawStoredChain(keys, ids, from, to);
  }

  touchedChain(keys: readonly BlockHash[], ids: ArrayLike<number>): void {
    this.tree.sawChain(keys, ids);
  }

  touched(_key: BlockHash, ready: boolean | null, id: number): void {
    if (ready !== true) return;
    const queue = this.queueOf[id];
    if (queue === IN_PROBATION) this.leaveProbation(id);
    else if (queue === IN_KEPT) this.kept.remove(id);
    else return;
    this.pushKept(id);
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const ids = this.chooseVictimIds(count, (id) => evictable(this.slots.keyOf(id)));
    return ids === null ? null : ids.map((id) => this.slots.keyOf(id));
  }

  chooseVictimIds(count: number, evictable: (id: number) => boolean): number[] | null {
    this.choice.begin(evictable);
    const victims: number[] = [];
    const free = this.isFree;
    const tree = this.tree;
    if (tree.hasOrphans) {
      for (let orphan = tree.oldestOrphan; orphan !== NO_SLOT && victims.length < count; orphan = tree.orphanAfter(orphan)) {
        if (free(orphan)) this.take(orphan, victims);
      }
    }
    const hold = this.bringsBack ? 0 : this.distances.holdTime;
    const now = this.history.now;
    let probationLeft = this.probation.size;
    let opened = false;
    let fromProbation = this.probation.oldest;
    let fromKept = this.kept.oldest;
    while (victims.length < count) {
      while (fromProbation !== NO_SLOT && !free(fromProbation)) fromProbation = this.probation.after(fromProbation);
      while (fromKept !== NO_SLOT && !free(fromKept)) fromKept = this.kept.after(fromKept);
      if (fromProbation !== NO_SLOT && (probationLeft > this.probationTarget || fromKept === NO_SLOT) && this.ranking !== null) {
        // Ranked: the least likely to be reused of the blocks old enough, or room from a less worthy class.
        const id = this.ranking.victim(hold, now, this.since, free, this.distances);
        if (id === NO_SLOT) return opened || !this.ranking.displace(count, victims, free, (d) => this.take(d, victims)) ? null : victims;
        opened = true;
        if (this.queueOf[this.take(id, victims)] === IN_PROBATION) probationLeft--;
      } else if (fromProbation !== NO_SLOT && (probationLeft > this.probationTarget || fromKept === NO_SLOT)) {
        // While its oldest new block is younger than the hold time, every new block stays and the store is
        // passed by. Once it is old enough, the store takes the rest of its room from the next oldest too:
        // a store of many blocks would otherwise wait forever behind one-block stores taking each block
        // as it comes of age.
        if (!opened && now - this.since[fromProbation] < hold) return null;
        opened = true;
        if (this.queueOf[this.take(fromProbation, victims)] === IN_PROBATION) probationLeft--;
      } else if (fromKept !== NO_SLOT) {
        this.take(fromKept, victims);
      } else {
        return null;
      }
    }
    return victims;
  }

  evicted(_keys: readonly BlockHash[], ids: readonly number[]): void {
    for (let i = 0; i < ids.length; i++) this.remove(ids[i]);
  }

  dropped(_key: BlockHash, id: number): void {
    this.remove(id);
  }

  reset(): void {
    this.probation.clear();
    this.ranking?.clear();
    this.kept.clear();
    this.queueOf.fill(IN_NONE);
    this.tree.clearHeld();
  }

  state(): HoldState {
    return { probation: this.keysOf(this.probation), kept: this.keysOf(this.kept), holdTime: this.distances.holdTime };
  }

  private keysOf(queue: SlotFifo): BlockHash[] {
    const out: BlockHash[] = [];
    for (let id = queue.oldest; id !== NO_SLOT; id = queue.after(id)) out.push(this.slots.keyOf(id));
    return out;
  }

  private pushKept(id: number): void {
    this.queueOf[id] = IN_KEPT;
    this.since[id] = this.history.now;
    this.kept.push(id);
  }

  private leaveProbation(id: number): void {
    this.probation.remove(id);
    this.ranking?.leftProbation(id);
  }

  private remove(id: number): void {
    const queue = this.queueOf[id];
    if (queue === IN_PROBATION) this.leaveProbation(id);
    else if (queue === IN_KEPT) this.kept.remove(id);
    this.queueOf[id] = IN_NONE;
    this.tree.removed(id);
  }

  /**
   * Chooses the deepest free block under queue block `id` (the block itself
   * when it has no free descendant) and returns it. The caller looks at `id`
   * again until it is chosen itself, so a chain leaves tail first.
   */
  private take(id: number, victims: number[]): number {
    const leaf = this.tree.deepestUnder(id, this.isFree, this.capacity);
    victims.push(leaf);
    this.choice.take(leaf);
    return leaf;
  }
}

/** An OffloadingManager over the CPU tier with the hold policy: it sees offers and lookups to learn reuse distances. */
export class HoldOffloadingManager extends CpuOffloadingManager {
  private readonly hold: HoldEvictionPolicy;

  /** `ranked`: the class hold policy (class-hold-manager.ts). */
  constructor(options: CpuOffloadingManagerOptions, ranked = false) {
    const policy = new HoldEvictionPolicy(options.capacityBlocks, ranked);
    super(options, policy);
    this.hold = policy;
  }

  override lookup(keys: readonly BlockHash[]): number {
    this.hold.lookingUp(keys);
    return super.lookup(keys);
  }

  override prepareStore(keys: readonly BlockHash[], admit?: StoreAdmission): PrepareStoreOutput | null {
    this.hold.offering(keys);
    return super.prepareStore(keys, admit);
  }

  /** A copy of the queues and the hold time (for diagnostics and tests). */
  holdState(): HoldState {
    return this.hold.state();
  }
}
