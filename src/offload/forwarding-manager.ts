import type { BlockHash } from '../core/block-hash.js';
import type { TierEventSink } from '../events/kv-cache-events.js';
import type { OffloadingManager, OffloadingManagerStats, PrepareStoreOutput, StoreAdmission } from './manager.js';

/**
 * An OffloadingManager that passes every call to the manager it wraps.
 * Wrappers that watch or filter the CPU tier (the reuse filter, the remote
 * tier's tracker, the sweep's stream recorder) extend it and override only
 * the calls they change, so a call added to the interface, or one a wrapper
 * forgot (queue protection), still reaches the tier.
 */
export class ForwardingManager implements OffloadingManager {
  constructor(protected readonly inner: OffloadingManager) {}

  lookup(keys: readonly BlockHash[]): number | null {
    return this.inner.lookup(keys);
  }

  prepareLoad(keys: readonly BlockHash[]): number[] {
    return this.inner.prepareLoad(keys);
  }

  touch(keys: readonly BlockHash[]): void {
    this.inner.touch(keys);
  }

  refresh(keys: readonly BlockHash[], from: number, to: number): void {
    this.inner.refresh(keys, from, to);
  }

  completeLoad(keys: readonly BlockHash[]): void {
    this.inner.completeLoad(keys);
  }

  prepareStore(keys: readonly BlockHash[], admit?: StoreAdmission): PrepareStoreOutput | null {
    return this.inner.prepareStore(keys, admit);
  }

  completeStore(keys: readonly BlockHash[], success: boolean): void {
    this.inner.completeStore(keys, success);
  }

  protect(owner: string, keys: readonly BlockHash[], front?: boolean): void {
    this.inner.protect?.(owner, keys, front);
  }

  get protectsQueued(): boolean {
    return this.inner.protect !== undefined && this.inner.protectsQueued !== false;
  }

  release(owner: string): void {
    this.inner.release?.(owner);
  }

  reset(): void {
    this.inner.reset();
  }

  stats(): OffloadingManagerStats {
    return this.inner.stats();
  }

  setEventSink(sink: TierEventSink | null): void {
    this.inner.setEventSink?.(sink);
  }

  readyKeys(): BlockHash[] {
    return this.inner.readyKeys?.() ?? [];
  }
}
