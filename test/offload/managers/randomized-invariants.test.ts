import { afterAll, describe, expect, it } from 'vitest';
import type { BlockHash } from '../../../src/core/block-hash.js';
import { arcManager } from '../../../src/offload/arc-manager.js';
import { hitDensityManager } from '../../../src/offload/hit-density-manager.js';
import { HoldOffloadingManager } from '../../../src/offload/hold-manager.js';
import { lruManager } from '../../../src/offload/lru-manager.js';
import type { OffloadingManager, OffloadingManagerStats } from '../../../src/offload/manager.js';
import { ReuseFilterManager } from '../../../src/offload/reuse-filter-manager.js';
import { s3FifoManager } from '../../../src/offload/s3fifo-manager.js';
import { Rng } from '../../support/random.js';
import { keys } from './helpers.js';

/**
 * Random sequences of every manager call against a tiny tier, checked after
 * each call against a plain model of what the tier must hold. The model is
 * deliberately naive (a map of blocks and their states); the manager has to
 * agree with it on every lookup, id, eviction and event.
 */

const CAPACITY = 4;
const UNIVERSE = keys(1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
const STEPS = 1000;
const SEEDS = [1, 2, 3, 4, 5];
const REUSE_THRESHOLD = 2;

interface ModelBlock {
  readonly id: number;
  storing: boolean;
  pins: number;
}

interface Subject {
  readonly manager: OffloadingManager;
  /** Answers lookups for the checks without counting as a sighting. */
  readonly probe: OffloadingManager;
  /** Whether the manager should store this absent key now. */
  admits(key: BlockHash): boolean;
  noteLookup(keys: readonly BlockHash[]): void;
  /** Policy-specific checks against the keys held. */
  checkPolicy(held: ReadonlySet<BlockHash>): void;
  /** Whether the manager keeps the blocks queued requests protect (otherwise `protect` must change nothing). */
  readonly protectsQueued?: boolean;
}

function sameKeys(actual: readonly BlockHash[], expected: ReadonlySet<BlockHash>): void {
  expect(new Set(actual)).toEqual(expected);
  expect(actual).toHaveLength(expected.size);
}

/** A manager that stores every absent key it is offered, checked by `checkPolicy`. */
function storingSubject(manager: OffloadingManager, checkPolicy: Subject['checkPolicy'], protectsQueued = false): Subject {
  return { manager, probe: manager, admits: () => true, noteLookup: () => {}, checkPolicy, protectsQueued };
}

function lruSubject(protectQueued = false): Subject {
  const manager = lruManager({ capacityBlocks: CAPACITY, protectQueued });
  return storingSubject(manager, (held) => sameKeys(manager.policy.keysOldestFirst(), held), protectQueued);
}

function checkArc(manager: ReturnType<typeof arcManager>, held: ReadonlySet<BlockHash>): void {
  const state = manager.policy.state();
  sameKeys([...state.t1, ...state.t2], held);
  expect(state.b1.length).toBeLessThanOrEqual(CAPACITY);
  expect(state.b2.length).toBeLessThanOrEqual(CAPACITY);
  for (const ghost of [...state.b1, ...state.b2]) expect(held.has(ghost)).toBe(false);
  expect(new Set([...state.b1, ...state.b2]).size).toBe(state.b1.length + state.b2.length);
  expect(state.targetT1Size).toBeGreaterThanOrEqual(0);
  expect(state.targetT1Size).toBeLessThanOrEqual(CAPACITY);
}

function arcSubject(): Subject {
  const manager = arcManager({ capacityBlocks: CAPACITY });
  return storingSubject(manager, (held) => checkArc(manager, held));
}

function reuseFilterSubject(): Subject {
  const backing = arcManager({ capacityBlocks: CAPACITY });
  // The tracker holds the whole key universe, so counts are never forgotten here.
  const manager = new ReuseFilterManager(backing, { threshold: REUSE_THRESHOLD, maxTrackerSize: 64 });
  const sightings = new Map<BlockHash, number>();
  return {
    manager,
    probe: backing,
    admits: (key) => (sightings.get(key) ?? 0) >= REUSE_THRESHOLD,
    noteLookup: (seen) => {
      for (const key of seen) sightings.set(key, (sightings.get(key) ?? 0) + 1);
    },
    checkPolicy: (held) => checkArc(backing, held),
  };
}

function hitDensitySubject(): Subject {
  const manager = hitDensityManager({ capacityBlocks: CAPACITY });
  return storingSubject(manager, (held) => {
    const state = manager.policy.state();
    sameKeys(state.keys, held);
    // One assertion each: this check runs after every random call.
    expect(state.orphans.filter((orphan) => !held.has(orphan))).toEqual([]);
    expect(Math.min(...state.densities)).toBeGreaterThanOrEqual(0);
  });
}

function holdSubject(protectQueued = false, ranked = false): Subject {
  const manager = new HoldOffloadingManager({ capacityBlocks: CAPACITY, protectQueued }, ranked);
  return storingSubject(manager, (held) => {
    const state = manager.holdState();
    sameKeys([...state.probation, ...state.kept], held);
  }, protectQueued);
}

function s3FifoSubject(protectQueued = false): Subject {
  const manager = s3FifoManager({ capacityBlocks: CAPACITY, protectQueued });
  return storingSubject(
    manager,
    (held) => {
      const state = manager.policy.state();
      sameKeys([...state.small, ...state.main], held);
      expect(state.ghosts.length).toBeLessThanOrEqual(4 * CAPACITY);
      for (const ghost of state.ghosts) expect(held.has(ghost)).toBe(false);
    },
    protectQueued,
  );
}

class Scenario {
  private readonly model = new Map<BlockHash, ModelBlock>();
  private readonly storesInFlight: BlockHash[][] = [];
  private readonly loadsInFlight: BlockHash[][] = [];
  /** Queued requests' protected keys and queue ranks (lower runs sooner), as the manager should keep them. */
  private readonly queued = new Map<string, { rank: number; keys: BlockHash[] }>();
  private backRank = 0;
  private frontRank = 0;
  /** How often the interesting cases came up, so a run that never reached them fails. */
  readonly seen = { refusedStores: 0, evictions: 0, declinedKeys: 0, failedStores: 0, resets: 0, protectedKept: 0, protectedEvicted: 0 };

  constructor(
    private readonly subject: Subject,
    private readonly random: Rng,
  ) {}

  get protectsQueued(): boolean {
    return this.subject.protectsQueued === true;
  }

  private get manager(): OffloadingManager {
    return this.subject.manager;
  }

  private randomKeys(maxLength: number): BlockHash[] {
    const length = 1 + this.random.below(maxLength);
    return Array.from({ length }, () => this.random.pick(UNIVERSE));
  }

  private isReady(key: BlockHash): boolean {
    const block = this.model.get(key);
    return block !== undefined && !block.storing;
  }

  step(): void {
    const roll = this.random.next();
    if (roll < 0.2) this.lookup();
    else if (roll < 0.32) this.prepareLoad();
    else if (roll < 0.44) this.completeLoad();
    else if (roll < 0.66) this.prepareStore();
    else if (roll < 0.84) this.completeStore();
    else if (roll < 0.89) this.manager.touch(this.randomKeys(4));
    else if (roll < 0.92) this.refresh();
    else if (roll < 0.96) this.protect();
    else if (roll < 0.995) this.release();
    else this.reset();
    this.checkInvariants();
  }

  /** A request's chain (distinct keys) refreshed after a store that offered its last few keys. */
  private refresh(): void {
    const chain = [...new Set(this.randomKeys(6))];
    const to = 1 + this.random.below(chain.length);
    // Keys past the end are not part of the chain: the manager must not read them.
    this.manager.refresh(chain, this.random.below(to + 1), to);
  }

  private lookup(): void {
    const wanted = this.randomKeys(5);
    let expected = 0;
    while (expected < wanted.length && this.isReady(wanted[expected])) expected++;
    this.subject.noteLookup(wanted);
    expect(this.manager.lookup(wanted)).toBe(expected);
  }

  private prepareLoad(): void {
    const ready = UNIVERSE.filter((key) => this.isReady(key));
    if (ready.length === 0) return;
    const wanted = Array.from({ length: 1 + this.random.below(3) }, () => this.random.pick(ready));
    expect(this.manager.prepareLoad(wanted)).toEqual(wanted.map((key) => this.model.get(key)?.id));
    for (const key of wanted) (this.model.get(key) as ModelBlock).pins++;
    this.loadsInFlight.push(wanted);
  }

  private completeLoad(): void {
    if (this.loadsInFlight.length === 0) return;
    const [done] = this.loadsInFlight.splice(this.random.below(this.loadsInFlight.length), 1);
    this.manager.completeLoad(done);
    for (const key of done) (this.model.get(key) as ModelBlock).pins--;
  }

  /** A request joins the queue (at its back, or its head as a preempted one does), protecting random keys. */
  private protect(): void {
    const owner = `r${this.random.below(4)}`;
    const wanted = this.randomKeys(3);
    const front = this.random.chance(0.3);
    this.manager.protect?.(owner, wanted, front);
    if (!this.subject.protectsQueued) return;
    this.queued.set(owner, { rank: front ? --this.frontRank : ++this.backRank, keys: wanted });
  }

  private release(): void {
    const owner = `r${this.random.below(4)}`;
    this.manager.release?.(owner);
    this.queued.delete(owner);
  }

  /** Rank of the nearest queued request protecting `key`, Infinity when none. */
  private rankOf(key: BlockHash): number {
    let rank = Infinity;
    for (const entry of this.queued.values()) if (entry.keys.includes(key)) rank = Math.min(rank, entry.rank);
    return rank;
  }

  private prepareStore(): void {
    const wanted = this.randomKeys(4);
    const input = new Set(wanted);
    const absent = [...input].filter((key) => !this.model.has(key));
    const toStore = absent.filter((key) => this.subject.admits(key));
    const declined = absent.filter((key) => !this.subject.admits(key));
    const free = CAPACITY - this.model.size;
    const mustEvict = Math.max(0, toStore.length - free);
    let candidates = [...this.model].filter(([key, block]) => !input.has(key) && !block.storing && block.pins === 0);
    // Protected blocks go only when unprotected ones do not make room, and only for blocks a nearer request reads.
    const unprotected = candidates.filter(([key]) => this.rankOf(key) === Infinity);
    if (unprotected.length >= mustEvict) {
      if (candidates.length > unprotected.length && mustEvict > 0) this.seen.protectedKept++;
      candidates = unprotected;
    } else {
      const nearest = Math.min(...toStore.map((key) => this.rankOf(key)));
      candidates = candidates.filter(([key]) => this.rankOf(key) > nearest);
      if (candidates.length >= mustEvict && candidates.length > unprotected.length) this.seen.protectedEvicted++;
    }
    const before = this.manager.stats();

    const out = this.manager.prepareStore(wanted);
    if (mustEvict > candidates.length) {
      // Refused: nothing but the refusal counter may change.
      expect(out).toBeNull();
      this.seen.refusedStores++;
      expect(this.manager.stats()).toEqual({ ...before, storesRejected: before.storesRejected + 1 });
      return;
    }
    expect(out).not.toBeNull();
    if (out === null) return;
    expect(out.keysToStore).toEqual(toStore);
    expect(out.declinedKeys).toEqual(declined);
    expect(out.evictedKeys).toHaveLength(mustEvict);
    this.seen.evictions += mustEvict;
    this.seen.declinedKeys += declined.length;
    for (const key of out.evictedKeys) {
      // Only ready, unpinned blocks outside the store's own keys may go.
      expect(candidates.map(([candidate]) => candidate)).toContain(key);
      this.model.delete(key);
    }
    const idsInUse = new Set([...this.model.values()].map((block) => block.id));
    expect(out.cpuBlockIds).toHaveLength(toStore.length);
    out.keysToStore.forEach((key, i) => {
      const id = out.cpuBlockIds[i];
      expect(id).toBeGreaterThanOrEqual(0);
      expect(id).toBeLessThan(CAPACITY);
      expect(idsInUse.has(id)).toBe(false);
      idsInUse.add(id);
      this.model.set(key, { id, storing: true, pins: 0 });
    });
    if (out.keysToStore.length > 0) this.storesInFlight.push([...out.keysToStore]);
  }

  private completeStore(): void {
    if (this.storesInFlight.length === 0) return;
    const [done] = this.storesInFlight.splice(this.random.below(this.storesInFlight.length), 1);
    const success = this.random.chance(0.75);
    this.manager.completeStore(done, success);
    if (!success) this.seen.failedStores++;
    for (const key of done) {
      if (success) (this.model.get(key) as ModelBlock).storing = false;
      else this.model.delete(key);
    }
  }

  /** The tier is lost: jobs still in flight are dropped, as the engine drops them. */
  private reset(): void {
    // Queued requests still wait after the tier is lost: their protection stays.
    this.manager.reset();
    this.seen.resets++;
    this.model.clear();
    this.storesInFlight.length = 0;
    this.loadsInFlight.length = 0;
  }

  private checkInvariants(): void {
    const stats: OffloadingManagerStats = this.manager.stats();
    const blocks = [...this.model.values()];
    expect(stats.usedBlocks).toBeLessThanOrEqual(CAPACITY);
    expect(stats.usedBlocks).toBe(this.model.size);
    expect(stats.beingStoredBlocks).toBe(blocks.filter((block) => block.storing).length);
    expect(stats.readyBlocks).toBe(blocks.filter((block) => !block.storing).length);
    expect(stats.pinnedBlocks).toBe(blocks.filter((block) => block.pins > 0).length);
    expect(new Set(blocks.map((block) => block.id)).size).toBe(blocks.length);

    for (const key of UNIVERSE) expect(this.subject.probe.lookup([key])).toBe(this.isReady(key) ? 1 : 0);
    this.subject.checkPolicy(new Set(this.model.keys()));
  }
}

const SUBJECTS: readonly { name: string; create: () => Subject; declines: boolean }[] = [
  { name: 'LRU manager', create: () => lruSubject(), declines: false },
  { name: 'LRU manager keeping queued requests\' blocks (lru+queue)', create: () => lruSubject(true), declines: false },
  { name: 'ARC manager', create: arcSubject, declines: false },
  { name: 'reuse filter over ARC', create: reuseFilterSubject, declines: true },
  { name: 'hit-density (LHD) manager', create: hitDensitySubject, declines: false },
  { name: 'S3-FIFO manager', create: () => s3FifoSubject(), declines: false },
  { name: 'S3-FIFO manager keeping queued requests\' blocks (s3fifo+queue)', create: () => s3FifoSubject(true), declines: false },
  { name: 'hold manager', create: () => holdSubject(), declines: false },
  { name: 'hold manager keeping queued requests\' blocks (hold+queue)', create: () => holdSubject(true), declines: false },
  { name: 'class hold manager', create: () => holdSubject(false, true), declines: false },
  { name: 'class hold manager keeping queued requests\' blocks (classhold+queue)', create: () => holdSubject(true, true), declines: false },
];

describe.each(SUBJECTS)('$name under random call sequences', ({ create, declines }) => {
  let protectedEvictions = 0;
  afterAll(() => {
    if (create().protectsQueued === true) expect(protectedEvictions).toBeGreaterThan(0);
  });
  it.each(SEEDS)(
    'keeps its blocks, ids and lookups consistent with a model of the tier (seed %i)',
    (seed) => {
      const scenario = new Scenario(create(), new Rng(seed));
      for (let i = 0; i < STEPS; i++) scenario.step();
      const { refusedStores, evictions, declinedKeys, failedStores, resets, protectedKept, protectedEvicted } = scenario.seen;
      expect(Math.min(refusedStores, evictions, failedStores, resets)).toBeGreaterThan(0);
      expect(declinedKeys > 0).toBe(declines);
      // Where queued requests protect blocks, both cases came up: kept over others, and evicted for a nearer request.
      // Where queued requests protect blocks, the protected ones were kept over others (and, over the seeds, evicted for a nearer request).
      if (scenario.protectsQueued) expect(protectedKept).toBeGreaterThan(0);
      protectedEvictions += protectedEvicted;
    },
  );
});
