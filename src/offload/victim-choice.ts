/**
 * The bookkeeping of one victim choice over a tier's CPU block ids, shared by
 * the policies that walk their queues and the prefix tree to choose: which
 * ids the caller lets go, and which the current choice took already. A
 * choice's marks are a stamp, so starting the next one clears nothing.
 */
export class VictimChoice {
  private readonly chosenStamp: Uint32Array;
  private stamp = 0;
  /** The current choice's filter (a field, so the walk allocates no closure). */
  private evictable: (id: number) => boolean = () => false;

  /** Evictable in the current choice and not taken by it yet. */
  readonly isFree = (id: number): boolean => this.chosenStamp[id] !== this.stamp && this.evictable(id);

  constructor(capacity: number) {
    this.chosenStamp = new Uint32Array(capacity);
  }

  /** Starts a choice among the ids `evictable` accepts; nothing is taken yet. */
  begin(evictable: (id: number) => boolean): void {
    this.evictable = evictable;
    if (this.stamp === 0xffffffff) {
      this.chosenStamp.fill(0);
      this.stamp = 0;
    }
    this.stamp++;
  }

  /** The current choice takes `id`. */
  take(id: number): void {
    this.chosenStamp[id] = this.stamp;
  }

  /** Whether the current choice took `id`. */
  took(id: number): boolean {
    return this.chosenStamp[id] === this.stamp;
  }
}
