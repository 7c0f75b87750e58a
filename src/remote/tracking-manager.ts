import type { BlockHash } from '../core/block-hash.js';
import { ForwardingManager } from '../offload/forwarding-manager.js';
import type { PrepareStoreOutput, StoreAdmission } from '../offload/manager.js';

/** What the remote tier needs to hear from the CPU tier's manager. */
export interface CpuTierObserver {
  /** These blocks' stores completed on every rank: they are ready at these CPU block ids. */
  blocksStored(keys: readonly BlockHash[], cpuBlockIds: readonly number[]): void;
  /** These ready blocks were evicted; their CPU blocks are reused by this step's transfers. */
  blocksEvicted(keys: readonly BlockHash[], cpuBlockIds: readonly number[]): void;
}

/**
 * An OffloadingManager that forwards every call to the CPU tier's manager
 * and tells an observer where blocks were stored and which were evicted:
 * the remote tier writes a block through after its store, or back when it is
 * evicted, by its CPU block id.
 */
export class CpuTierTrackingManager extends ForwardingManager {
  /** CPU block id of every block being stored or ready. */
  private readonly cpuIds = new Map<BlockHash, number>();
  private observer: CpuTierObserver | null = null;

  observe(observer: CpuTierObserver): void {
    this.observer = observer;
  }

  override prepareStore(keys: readonly BlockHash[], admit?: StoreAdmission): PrepareStoreOutput | null {
    const out = this.inner.prepareStore(keys, admit);
    if (out === null) return null;
    if (out.evictedKeys.length > 0) {
      const ids: number[] = [];
      for (const key of out.evictedKeys) {
        ids.push(this.cpuIds.get(key) ?? -1);
        this.cpuIds.delete(key);
      }
      this.observer?.blocksEvicted(out.evictedKeys, ids);
    }
    out.keysToStore.forEach((key, i) => this.cpuIds.set(key, out.cpuBlockIds[i]));
    return out;
  }

  override completeStore(keys: readonly BlockHash[], success: boolean): void {
    this.inner.completeStore(keys, success);
    if (!success) {
      for (const key of keys) this.cpuIds.delete(key);
      return;
    }
    const stored: BlockHash[] = [];
    const ids: number[] = [];
    for (const key of keys) {
      const id = this.cpuIds.get(key);
      if (id === undefined) continue;
      stored.push(key);
      ids.push(id);
    }
    if (stored.length > 0) this.observer?.blocksStored(stored, ids);
  }

  override reset(): void {
    this.inner.reset();
    this.cpuIds.clear();
  }

}
