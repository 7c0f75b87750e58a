/**
 * How far apart, in the tier's traffic, a block's store and its next lookup
 * fall, and the hold time that makes the most of a tier of a given size.
 *
 * A tier of C blocks that keeps every block it stores holds each for about
 * C blocks of traffic, so it hits the reuses closer than C. When most
 * reuses come later than that, keeping a share C/T of the blocks for T
 * blocks of traffic (and passing the others by) hits (C/T) x F(T) of them,
 * F being the share of reuses within T. The best T maximizes F(T)/T over
 * T > C; when none beats T = C, the tier should simply keep what it stores.
 *
 * Distances are counted in a histogram of equal buckets up to a horizon
 * (longer ones fall in the last bucket, which no hold time reaches). Counts
 * are halved every `horizon` observations, so the choice follows a workload
 * whose rhythm changes.
 */

/** Buckets of the histogram. */
const BUCKETS = 64;
/** Observations between two choices of the hold time. */
const OBSERVATIONS_PER_CHOICE = 64;
/**
 * The hold time is this multiple of the best T. A block enters probation
 * only as an older one leaves it, so most are held a while past the gate;
 * holding somewhat longer than F(T)/T's peak also keeps the reuses just past
 * it, where F still rises steeply.
 */
const HOLD_MARGIN = 1.5;
/**
 * A hold time must promise this many times the hits of keeping everything:
 * passing stores by for a gain within the histogram's noise loses more than
 * it wins.
 */
const MIN_GAIN = 1.1;

export class ReuseDistances {
  private readonly counts = new Float64Array(BUCKETS);
  private readonly bucketWidth: number;
  private observations = 0;
  private hold = 0;
  /** Sum of counts. */
  private total = 0;
  /** laterCounts[b]: the counts of buckets b .. BUCKETS - 2, recomputed when a count changed. */
  private readonly laterCounts = new Float64Array(BUCKETS);
  private laterStale = true;

  /**
   * `capacityBlocks`: the tier's size C; `horizon`: the longest distance
   * measured, in blocks of traffic (distances past it count as never).
   */
  constructor(
    private readonly capacityBlocks: number,
    readonly horizon: number,
  ) {
    if (!Number.isSafeInteger(capacityBlocks) || capacityBlocks < 1) {
      throw new RangeError(`capacityBlocks must be an integer >= 1, got ${String(capacityBlocks)}`);
    }
    if (!Number.isSafeInteger(horizon) || horizon < BUCKETS) {
      throw new RangeError(`horizon must be an integer >= ${BUCKETS}, got ${String(horizon)}`);
    }
    this.bucketWidth = horizon / BUCKETS;
  }

  /**
   * Blocks of traffic a block should be kept before it may be evicted, or 0
   * when keeping everything the tier stores is best (or no choice could be
   * made yet).
   */
  get holdTime(): number {
    return this.hold;
  }

  /**
   * Of the reuses seen, the share that came more than `age` blocks of traffic
   * after their offer (1 before any was seen): how likely a block not reused
   * by that age still is to be, relative to a new one.
   */
  shareLaterThan(age: number): number {
    if (this.total <= 0) return 1;
    if (this.laterStale) {
      // The last bucket holds the distances past the horizon, which no hold reaches.
      let later = 0;
      this.laterCounts[BUCKETS - 1] = 0;
      for (let b = BUCKETS - 2; b >= 0; b--) this.laterCounts[b] = later += this.counts[b];
      this.laterStale = false;
    }
    return this.laterCounts[Math.min(BUCKETS - 1, Math.max(0, Math.floor(age / this.bucketWidth)))] / this.total;
  }

  /** A block was looked up `distance` blocks of traffic after it was offered; `now`: blocks of traffic so far. */
  observe(distance: number, now: number): void {
    const bucket = Math.min(BUCKETS - 1, Math.max(0, Math.floor(distance / this.bucketWidth)));
    this.counts[bucket]++;
    this.total++;
    this.laterStale = true;
    this.observations++;
    if (this.observations % OBSERVATIONS_PER_CHOICE === 0) this.choose(now);
    if (this.observations >= this.horizon) {
      this.observations = 0;
      for (let b = 0; b < BUCKETS; b++) this.counts[b] /= 2;
      this.total /= 2;
    }
  }

  /** Picks the T > C that maximizes F(T)/T, bucket edge by bucket edge; the last bucket (beyond the horizon) is no candidate. */
  private choose(now: number): void {
    let within = 0;
    let best = 0;
    let bestT = 0;
    // F(C)/C is the score of keeping everything: only a longer hold that beats it gates anything.
    let atCapacity = -1;
    for (let b = 0; b < BUCKETS - 1; b++) {
      const t = (b + 1) * this.bucketWidth;
      // Early on, only blocks offered long enough ago can show a long distance: scale each bucket by
      // the share of the traffic that old (reuses of the rest are still to come).
      if (t >= now) break;
      within += (this.counts[b] * now) / (now - b * this.bucketWidth);
      if (t < this.capacityBlocks) continue;
      const score = within / t;
      if (atCapacity < 0) atCapacity = score;
      if (score > best) {
        best = score;
        bestT = t;
      }
    }
    // No hold time past the capacity can be judged yet (the traffic has not passed it).
    if (atCapacity < 0) return;
    this.hold = bestT > this.capacityBlocks && best > atCapacity * MIN_GAIN ? bestT * HOLD_MARGIN : 0;
  }
}
