import type { BlockHash } from '../core/block-hash.js';
import type { BlockRemovedEvent, KvCacheEvent, KvEventBatch, KvEventCollector, KvMedium, TierEventSink } from './kv-cache-events.js';

/** Receives each step's batch, synchronously, as the engine ends the step. */
export type KvEventListener = (batch: KvEventBatch) => void;

/** A removal event still being filled: consecutive removals of one tier in a step share one event. */
interface OpenRemoval {
  readonly type: 'BlockRemoved';
  readonly blockHashes: BlockHash[];
  readonly medium: KvMedium;
}

/**
 * Collects the events the tiers report during a step and hands them to the
 * listeners as one batch when the engine ends the step (vLLM publishes one
 * batch per scheduler step too). A step without events publishes nothing.
 */
export class KvEventRecorder implements KvEventCollector {
  private pending: KvCacheEvent[] = [];
  private openRemoval: OpenRemoval | null = null;
  private readonly listeners = new Set<KvEventListener>();

  /** The sink of one tier: its events carry `medium`, its stored blocks `blockSize` tokens each. */
  sinkFor(medium: KvMedium, blockSize: number): TierEventSink {
    return {
      blockSize,
      stored: (hashes, parent, tokenIds) => {
        if (hashes.length === 0) return;
        this.openRemoval = null;
        this.pending.push({ type: 'BlockStored', blockHashes: hashes, parentBlockHash: parent, tokenIds, blockSize, medium });
      },
      removed: (hash) => {
        const open = this.openRemoval;
        if (open !== null && open.medium === medium) {
          open.blockHashes.push(hash);
          return;
        }
        const event: OpenRemoval = { type: 'BlockRemoved', blockHashes: [hash], medium };
        this.openRemoval = event;
        this.pending.push(event satisfies BlockRemovedEvent);
      },
      cleared: () => {
        this.openRemoval = null;
        this.pending.push({ type: 'AllBlocksCleared' });
      },
    };
  }

  /** Adds a listener; returns the function that removes it. */
  addListener(listener: KvEventListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  /** Ends the step: hands the events recorded since the last flush to every listener, as one batch stamped `ts` (seconds). */
  flush(ts: number = Date.now() / 1000): void {
    if (this.pending.length === 0) return;
    const batch: KvEventBatch = { ts, events: this.pending };
    this.pending = [];
    this.openRemoval = null;
    for (const listener of this.listeners) listener(batch);
  }
}
