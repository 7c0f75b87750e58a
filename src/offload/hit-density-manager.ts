import type { BlockHash } from '../core/block-hash.js';
import { SeededRandom } from '../core/prng.js';
import { CpuOffloadingManager, type CpuOffloadingManagerOptions } from './cpu-offloading-manager.js';
import type { EvictionPolicy } from './manager.js';
import { ArraySet, PrefixLinks, type ChosenKeys } from './prefix-links.js';

/**
 * Least hit density (after Beckmann et al., "LHD: Improving Cache Hit Rate by
 * Maximizing Hit Density", NSDI 2018), over the prefix tree of the tier.
 *
 * A block's worth is the hits it can still expect per unit of space-time it
 * will still occupy. The policy learns both from what happened to earlier
 * blocks of the same class (how often the prefix was reused so far: 0, 1, 2,
 * 3+) at the same age (tier insertions since the block was last used): a
 * histogram of hit ages and one of eviction ages per class, decayed over
 * time. The hit density at age a is
 *
 *     sum_{x >= a} hits[x] / sum_{x >= a} (x - a + 1) * (hits[x] + evictions[x]).
 *
 * Prompts whose reuse comes back long after they were stored (a conversation's
 * next turn) make young blocks worth less than old ones that are close to
 * their reuse, so under a working set larger than the tier the policy keeps
 * a subset long enough to be reused instead of cycling everything through
 * (where LRU hits nothing). Once a class's hits stop coming at some age,
 * blocks older than that go first.
 *
 * Victims are the least dense of a few sampled blocks; from the chosen block
 * the policy walks down to the deepest held block of its subtree and evicts
 * that leaf, so ancestors leave after their descendants and no held block
 * loses its parent while a leaf could go instead. Blocks whose parent did
 * leave (the only possible victim was a parent) are worth nothing and go
 * first.
 */

/** Reuse classes: prefixes reused 0, 1, 2 and 3+ times since they were stored. */
const CLASSES = 4;
/** Age buckets of each histogram; ages beyond the last share it. */
const AGE_BUCKETS = 256;
/** Age buckets per tier capacity: the histograms cover 16 capacities of insertions. */
const BUCKETS_PER_CAPACITY = 16;
/** Blocks sampled per victim. */
const SAMPLES = 32;
/** Weight the histograms keep at each recomputation (older evidence fades). */
const DECAY = 0.9;
/**
 * Share of new prompts kept as explorers: evicted only once they reach the
 * oldest age, so the histograms see reuses older than the policy would
 * otherwise let any block grow (without them it can never learn to keep a
 * block longer than it already does).
 */
const EXPLORE_SHARE = 0.1;
/** Recompute the densities after this share of the capacity was inserted. */
const RECOMPUTE_PER_CAPACITY = 1 / 8;

interface Entry {
  /** Position in the sampling array. */
  index: number;
  /** Insertion clock at the last store or reuse. */
  lastUse: number;
  /** Reuses seen since the block was stored. */
  reuses: number;
  /** Kept until the oldest age whatever its density (see EXPLORE_SHARE). */
  readonly explorer: boolean;
}

export interface HitDensityState {
  /** Held keys, in no particular order. */
  readonly keys: readonly BlockHash[];
  /** Held parent-child links. */
  readonly links: number;
  /** Held blocks whose parent is gone. */
  readonly orphans: readonly BlockHash[];
  /** Densities per class and age bucket (class-major). */
  readonly densities: readonly number[];
}

export class HitDensityEvictionPolicy implements EvictionPolicy {
  private readonly entries = new Map<BlockHash, Entry>();
  private readonly sample: BlockHash[] = [];
  private readonly links: PrefixLinks;
  /** Whether each prompt block looked up but not stored yet explores (bounded, oldest first). */
  private readonly exploring = new Map<BlockHash, boolean>();
  private readonly maxExploring: number;
  private readonly random: SeededRandom;
  private readonly granularity: number;
  private readonly recomputeEvery: number;
  private readonly hitAges = new Float64Array(CLASSES * AGE_BUCKETS);
  private readonly evictionAges = new Float64Array(CLASSES * AGE_BUCKETS);
  private readonly density = new Float64Array(CLASSES * AGE_BUCKETS);
  /** Blocks admitted so far: the clock ages are measured in. */
  private clock = 0;
  private nextRecompute: number;

  constructor(capacity: number, seed = 1) {
    this.granularity = Math.max(1, Math.ceil(capacity / BUCKETS_PER_CAPACITY));
    this.recomputeEvery = Math.max(16, Math.ceil(capacity * RECOMPUTE_PER_CAPACITY));
    this.nextRecompute = this.recomputeEvery;
    this.random = new SeededRandom(seed);
    this.maxExploring = Math.max(65_536, 4 * capacity);
    // Parents must be remembered from a prompt's lookup until its blocks are stored.
    this.links = new PrefixLinks(Math.max(65_536, 4 * capacity), (key) => this.entries.has(key));
    // Until evidence arrives: older and less reused blocks first (LRU with frequency).
    for (let c = 0; c < CLASSES; c++) {
      for (let a = 0; a < AGE_BUCKETS; a++) this.density[c * AGE_BUCKETS + a] = (c + 1) / (a + 1);
    }
  }

  admitted(key: BlockHash): void {
    this.clock++;
    const explorer = this.exploring.get(key) ?? false;
    this.exploring.delete(key);
    this.entries.set(key, { index: this.sample.length, lastUse: this.clock, reuses: 0, explorer });
    this.sample.push(key);
    this.links.added(key);
    if (this.clock >= this.nextRecompute) {
      this.recompute();
      this.nextRecompute = this.clock + this.recomputeEvery;
    }
  }

  touchedChain(keys: readonly BlockHash[]): void {
    this.links.sawChain(keys);
    // A prompt explores as a whole: one draw for the blocks it will store.
    let draw: boolean | undefined;
    for (const key of keys) {
      if (this.entries.has(key) || this.exploring.has(key)) continue;
      draw ??= this.random.nextUint32() / 2 ** 32 < EXPLORE_SHARE;
      this.exploring.set(key, draw);
      if (this.exploring.size > this.maxExploring) this.exploring.delete(this.exploring.keys().next().value as BlockHash);
    }
  }

  readonly refreshReadsWholeChain = false;

  /** No age or hit changes (a request extending its chain reuses nothing); the links learn the offered blocks' parents. */
  refreshedChain(keys: readonly BlockHash[], _ids: ArrayLike<number>, from: number, to: number): void {
    this.links.sawChain(keys, from, to);
  }

  touched(key: BlockHash, ready: boolean | null): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    const age = this.ageOf(entry);
    // Repeated lookups of one waiting request land in the same age bucket: one use, not many.
    if (ready === true && age > 0) {
      this.hitAges[this.cell(entry, age)]++;
      entry.reuses++;
    }
    entry.lastUse = this.clock;
  }

  chooseVictims(count: number, evictable: (key: BlockHash) => boolean): BlockHash[] | null {
    const victims: BlockHash[] = [];
    if (count <= 0) return victims;
    // Most calls want one victim: a Set for the chosen ones only when they may be many.
    const chosen: ChosenKeys = count > 8 ? new Set<BlockHash>() : new ArraySet(victims);
    const free = (key: BlockHash) => !chosen.has(key) && evictable(key);
    if (this.links.hasOrphans) for (const orphan of this.links.orphanKeys()) {
      if (victims.length === count) return victims;
      if (free(orphan)) {
        victims.push(orphan);
        chosen.add(orphan);
      }
    }
    const candidate = (key: BlockHash) => free(key) && !this.isYoungExplorer(key);
    while (victims.length < count) {
      const least = this.sampleLeastDense(candidate) ?? this.scanLeastDense(candidate) ?? this.scanLeastDense(free);
      if (least === undefined) return null;
      const leaf = this.links.deepestUnder(least, free, this.sample.length);
      victims.push(leaf);
      chosen.add(leaf);
    }
    return victims;
  }

  evicted(keys: readonly BlockHash[]): void {
    for (const key of keys) {
      const entry = this.entries.get(key);
      if (entry === undefined) continue;
      this.evictionAges[this.cell(entry, this.ageOf(entry))]++;
      this.remove(key, entry);
    }
  }

  dropped(key: BlockHash): void {
    const entry = this.entries.get(key);
    if (entry !== undefined) this.remove(key, entry);
  }

  reset(): void {
    // The learned densities describe the workload, not the lost contents: they stay.
    this.entries.clear();
    this.sample.length = 0;
    this.links.clearHeld();
  }

  state(): HitDensityState {
    return {
      keys: [...this.sample],
      links: this.links.linkCount(),
      orphans: [...this.links.orphanKeys()],
      densities: [...this.density],
    };
  }

  private isYoungExplorer(key: BlockHash): boolean {
    const entry = this.entries.get(key) as Entry;
    return entry.explorer && this.ageOf(entry) < AGE_BUCKETS - 1;
  }

  private ageOf(entry: Entry): number {
    return Math.min(AGE_BUCKETS - 1, Math.floor((this.clock - entry.lastUse) / this.granularity));
  }

  private cell(entry: Entry, age: number): number {
    return Math.min(entry.reuses, CLASSES - 1) * AGE_BUCKETS + age;
  }

  private densityOf(entry: Entry): number {
    return this.density[this.cell(entry, this.ageOf(entry))];
  }

  /** The least dense of SAMPLES random held blocks `free` accepts (older first on ties), if any. */
  private sampleLeastDense(free: (key: BlockHash) => boolean): BlockHash | undefined {
    let best: BlockHash | undefined;
    let bestDensity = Infinity;
    let bestUse = Infinity;
    const n = this.sample.length;
    if (n === 0) return undefined;
    for (let s = 0; s < SAMPLES; s++) {
      const key = this.sample[this.random.nextUint32() % n];
      if (!free(key)) continue;
      const entry = this.entries.get(key) as Entry;
      const density = this.densityOf(entry);
      if (density < bestDensity || (density === bestDensity && entry.lastUse < bestUse)) {
        best = key;
        bestDensity = density;
        bestUse = entry.lastUse;
      }
    }
    return best;
  }

  /** The least dense of every held block `free` accepts: when sampling found none. */
  private scanLeastDense(free: (key: BlockHash) => boolean): BlockHash | undefined {
    let best: BlockHash | undefined;
    let bestDensity = Infinity;
    for (const key of this.sample) {
      if (!free(key)) continue;
      const density = this.densityOf(this.entries.get(key) as Entry);
      if (density < bestDensity) {
        best = key;
        bestDensity = density;
      }
    }
    return best;
  }

  private remove(key: BlockHash, entry: Entry): void {
    const last = this.sample.pop() as BlockHash;
    if (last !== key) {
      this.sample[entry.index] = last;
      (this.entries.get(last) as Entry).index = entry.index;
    }
    this.entries.delete(key);
    this.links.removed(key);
  }

  /** Densities from the histograms, then the histograms fade. */
  private recompute(): void {
    for (let c = 0; c < CLASSES; c++) {
      const base = c * AGE_BUCKETS;
      let evidence = 0;
      for (let a = 0; a < AGE_BUCKETS; a++) evidence += this.hitAges[base + a] + this.evictionAges[base + a];
      // No evidence for this class yet: keep the prior.
      if (evidence === 0) continue;
      let hits = 0;
      let events = 0;
      let lifetime = 0;
      for (let a = AGE_BUCKETS - 1; a >= 0; a--) {
        hits += this.hitAges[base + a];
        events += this.hitAges[base + a] + this.evictionAges[base + a];
        lifetime += events;
        // Older than anything seen happen to a block of this class: worth nothing known.
        this.density[base + a] = lifetime > 0 ? hits / lifetime : 0;
      }
    }
    for (let i = 0; i < this.hitAges.length; i++) {
      this.hitAges[i] *= DECAY;
      this.evictionAges[i] *= DECAY;
    }
  }
}

/** A manager of the CPU tier that evicts the least hit-dense blocks, leaves first. */
export function hitDensityManager(options: CpuOffloadingManagerOptions): CpuOffloadingManager<HitDensityEvictionPolicy> {
  return new CpuOffloadingManager(options, new HitDensityEvictionPolicy(options.capacityBlocks));
}
