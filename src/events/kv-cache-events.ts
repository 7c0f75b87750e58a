import type { BlockHash } from '../core/block-hash.js';

/**
 * KV cache events: which blocks a tier of one engine gained and lost, in the
 * shape of vLLM's `vllm/distributed/kv_events.py`, so a prefix-aware router
 * written for vLLM can follow a kvtier engine.
 *
 * This file is plain data and the sink the caches report into; it sits at the
 * bottom (it imports only the block hash type), so the GPU block pool and the
 * CPU tier's manager can report without knowing who listens.
 */

/** Where a block lives: the GPU prefix cache or the CPU offload tier (vLLM's `medium`). */
export type KvMedium = 'GPU' | 'CPU';

/**
 * Blocks became loadable in a tier. For the GPU, `blockHashes` chain: the
 * first extends `parentBlockHash` (null: the first block of a prompt) and
 * `tokenIds` holds their tokens, `blockSize` per block. The CPU tier's events
 * name blocks by key alone (no parent, no tokens), as vLLM's offloading
 * connector does; its `blockSize` is the offloaded block's token count.
 */
export interface BlockStoredEvent {
  readonly type: 'BlockStored';
  readonly blockHashes: readonly BlockHash[];
  readonly parentBlockHash: BlockHash | null;
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  readonly medium: KvMedium;
}

/** Blocks left a tier (evicted, dropped after a failed load, or the tier was reset). */
export interface BlockRemovedEvent {
  readonly type: 'BlockRemoved';
  readonly blockHashes: readonly BlockHash[];
  readonly medium: KvMedium;
}

/** Every block of the engine is gone (its ranks were reset after a rank loss). */
export interface AllBlocksClearedEvent {
  readonly type: 'AllBlocksCleared';
}

export type KvCacheEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

/** The events of one engine step, in the order they happened. */
export interface KvEventBatch {
  /** Wall-clock time of the batch, seconds since the Unix epoch (vLLM's `ts`). */
  readonly ts: number;
  readonly events: readonly KvCacheEvent[];
}

/** A request's tokens by position (prompt then output), as a block table's run of blocks reads them. */
export interface BlockTokenSource {
  tokenAt(position: number): number;
  /** Tokens at positions [start, end) in an array of their own. */
  tokensBetween(start: number, end: number): number[];
  /**
   * Copies the tokens at positions [start, end) into `into` from index `at`:
   * one call per block run rather than one per token. Optional: a source
   * without it is read by tokenAt.
   */
  copyTokens?(start: number, end: number, into: Int32Array, at: number): void;
}

/** A stored event's arrays, as TierEventSink.stored() takes them. */
export interface StoredArrays {
  readonly hashes: BlockHash[];
  readonly parent: BlockHash | null;
  readonly tokenIds: number[];
}

/**
 * The run [from, to) of a block table (TierEventSink.storedRun) in arrays of
 * its own: hashes[from..to), the parent hashes[from - 1] (none at 0), and the
 * tokens at positions [from x blockSize, to x blockSize).
 */
export function storedRunArrays(hashes: readonly BlockHash[], from: number, to: number, tokens: BlockTokenSource, blockSize: number): StoredArrays {
  return {
    hashes: hashes.slice(from, to),
    parent: from > 0 ? hashes[from - 1] : null,
    tokenIds: tokens.tokensBetween(from * blockSize, to * blockSize),
  };
}

/**
 * A hash's value as a KV event carries it, as two 32-bit words (high, low):
 * for kvtier's 16-hex-digit hashes, the two lanes its tables key on
 * (core/block-hash.ts). A tier that keeps them beside its blocks hands them
 * to the sink with the hash, so the sink (the KV event ring) copies words
 * rather than finding them from the text. Only where every hash handed over
 * has such a value: otherwise the tier hands the text alone.
 */
export type HashWords = Int32Array;

/**
 * What one tier reports into. Calls are synchronous and cheap; the tier
 * reports only while a sink is attached, so an engine nobody listens to
 * pays nothing.
 */
export interface TierEventSink {
  /** Tokens per block of this tier. */
  readonly blockSize: number;
  /**
   * `hashes` became loadable; for a chain, `parent` is the block before the first and `tokenIds` their tokens.
   * The sink keeps both arrays as they are: hand over arrays no one changes afterwards.
   * `words`, where the tier keeps its hashes' values beside its blocks: those of `hashes`, in
   * order, as (high, low) pairs (see HashWords); read during the call only.
   */
  stored(hashes: readonly BlockHash[], parent: BlockHash | null, tokenIds: readonly number[], words?: HashWords): void;
  /**
   * stored() for the run [from, to) of a block table: the hashes
   * hashes[from..to), the parent hashes[from - 1] (none at 0), the tokens at
   * positions [from x blockSize, to x blockSize) of `tokens`. For a sink
   * that copies what it is given (the KV event ring): the tier then builds
   * no arrays for it. Optional: a sink without it gets stored() with arrays
   * of their own. Nothing given is kept. `words`, where the tier keeps its
   * hashes' values beside its blocks: those of hashes[from - 1 .. to) as
   * (high, low) pairs from index 0, the parent's first (zeros when `from` is 0).
   */
  storedRun?(hashes: readonly BlockHash[], from: number, to: number, tokens: BlockTokenSource, words?: HashWords): void;
  /** `hash` left the tier. */
  removed(hash: BlockHash): void;
  /**
   * removed(hash) where the tier keeps the hash's value beside the block:
   * its words (high, low), so the sink need not find them from the text.
   * Optional: a sink without it gets removed(hash).
   */
  removedWords?(hash: BlockHash, high: number, low: number): void;
  /** The whole tier was dropped at once. */
  cleared(): void;
}

/**
 * What an engine records its tiers' events into: a sink per tier, and the
 * end of each step. The in-process recorder (objects, for listeners and the
 * async iterator) and the ring to the KV event thread (integer records) are
 * both collectors; an engine feeds every collector attached to it.
 */
export interface KvEventCollector {
  /** The sink of one tier: its events carry `medium`, its stored blocks `blockSize` tokens each. */
  sinkFor(medium: KvMedium, blockSize: number): TierEventSink;
  /** Ends the step: the events since the last flush form one batch stamped `ts` (seconds); a step without events forms none. */
  flush(ts: number): void;
}
