import { ConfigError, KvtierError } from '../core/errors.js';
import { ERROR_CODES } from '../core/error-codes.js';

/** The CPU block allocator was asked for more blocks than are free, or to free a block it did not hand out. */
export class CpuBlockAllocatorError extends KvtierError {
  constructor(message: string) {
    super(ERROR_CODES.cpuAllocator, message);
  }
}

/**
 * Hands out CPU tier block ids in [0, capacity). Ids never handed out yet come
 * first, in increasing order, so a fresh tier fills from the bottom; after
 * that, freed ids are reused last-freed-first (the most recently written
 * memory is the likeliest to still be warm in the host caches).
 *
 * Every rank holds its shard of CPU block `i` at the same id `i`, so this one
 * allocator on the scheduler side decides placement for all ranks.
 */
export class CpuBlockAllocator {
  readonly capacity: number;
  /** Ids below this have been handed out at least once. */
  private nextFreshId = 0;
  /** Freed ids, the most recently freed last. */
  private readonly freedIds: number[] = [];
  /** 1 where the id is currently allocated: catches double frees. */
  private readonly allocated: Uint8Array;

  constructor(capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new ConfigError(`CPU block allocator: capacity must be an integer >= 1, got ${String(capacity)}`);
    }
    this.capacity = capacity;
    this.allocated = new Uint8Array(capacity);
  }

  get numFree(): number {
    return this.capacity - this.nextFreshId + this.freedIds.length;
  }

  get numAllocated(): number {
    return this.capacity - this.numFree;
  }

  /** `count` ids: fresh ones first, then the most recently freed. Throws when fewer are free. */
  allocate(count: number): number[] {
    if (!Number.isSafeInteger(count) || count < 0) {
      throw new CpuBlockAllocatorError(`allocate: count must be an integer >= 0, got ${String(count)}`);
    }
    if (count > this.numFree) {
      throw new CpuBlockAllocatorError(
        `allocate: ${count} blocks requested but only ${this.numFree} of ${this.capacity} are free`,
      );
    }
    // Filled by index into an array of the final size (a huge one grows as it fills, never sparse).
    const ids: number[] = count <= 16384 ? new Array<number>(count) : [];
    let n = 0;
    while (n < count && this.nextFreshId < this.capacity) ids[n++] = this.nextFreshId++;
    while (n < count) ids[n++] = this.freedIds.pop() as number;
    for (let i = 0; i < count; i++) this.allocated[ids[i]] = 1;
    return ids;
  }

  /** Returns `id` to the pool. Throws for an id out of range or not allocated. */
  free(id: number): void {
    if (!Number.isSafeInteger(id) || id < 0 || id >= this.capacity) {
      throw new CpuBlockAllocatorError(`free: block id ${String(id)} is outside [0, ${this.capacity})`);
    }
    if (this.allocated[id] === 0) {
      throw new CpuBlockAllocatorError(`free: block id ${id} is not allocated`);
    }
    this.allocated[id] = 0;
    this.freedIds.push(id);
  }

  /** Forgets every allocation: the next ids handed out are 0, 1, 2, ... again. */
  reset(): void {
    this.nextFreshId = 0;
    this.freedIds.length = 0;
    this.allocated.fill(0);
  }
}
