import v8 from 'node:v8';
import { median } from './stats.js';

/**
 * Heap bytes allocated by single calls, read from V8's heap statistics
 * around each call. A call during which a garbage collection ran shows less
 * used heap after than before (a scavenge frees the young generation's
 * garbage) and is not counted; so is a call that allocated so much that its
 * reading is ambiguous. The statistics' own allocation, measured with
 * nothing between two reads, is taken out.
 */
export class AllocationProbe {
  private readonly overhead: number;

  constructor() {
    const samples: number[] = [];
    for (let i = 0; i < 33; i++) {
      const before = usedHeap();
      const after = usedHeap();
      if (after >= before) samples.push(after - before);
    }
    this.overhead = samples.length === 0 ? 0 : median(samples);
  }

  /** Bytes `call` allocated, or null when a collection ran during it. */
  measure(call: () => void): number | null {
    const before = usedHeap();
    call();
    const after = usedHeap();
    if (after < before) return null;
    return Math.max(0, after - before - this.overhead);
  }
}

function usedHeap(): number {
  return v8.getHeapStatistics().used_heap_size;
}
