import { storedRunArrays, type HashWords, type KvEventCollector, type KvMedium, type StoredArrays, type TierEventSink } from './kv-cache-events.js';

/** A tier that reports its events into a sink (the GPU block pool, the CPU tier's manager). */
export interface EventReportingTier {
  readonly medium: KvMedium;
  /** Tokens per block of this tier. */
  readonly blockSize: number;
  setEventSink(sink: TierEventSink | null): void;
}

/**
 * The collectors attached to one engine. With one collector the tiers
 * report straight into its sinks; with several, into a sink that hands each
 * report to all of them in turn; with none, the tiers report nothing.
 */
export class KvEventCollectors {
  private collectors: KvEventCollector[] = [];

  constructor(private readonly tiers: readonly EventReportingTier[]) {}

  /** Feeds `collector` every tier's events from now on; returns the function that stops it. */
  add(collector: KvEventCollector): () => void {
    this.collectors = [...this.collectors, collector];
    this.install();
    return () => {
      if (!this.collectors.includes(collector)) return;
      this.collectors = this.collectors.filter((c) => c !== collector);
      this.install();
    };
  }

  get size(): number {
    return this.collectors.length;
  }

  /** Ends the step in every collector, with one timestamp (seconds since the epoch). */
  flush(): void {
    const collectors = this.collectors;
    if (collectors.length === 0) return;
    const ts = Date.now() / 1000;
    for (let i = 0; i < collectors.length; i++) collectors[i].flush(ts);
  }

  private install(): void {
    for (const tier of this.tiers) {
      const sinks = this.collectors.map((c) => c.sinkFor(tier.medium, tier.blockSize));
      tier.setEventSink(sinks.length === 0 ? null : sinks.length === 1 ? sinks[0] : fanOut(tier.blockSize, sinks));
    }
  }
}

function fanOut(blockSize: number, sinks: readonly TierEventSink[]): TierEventSink {
  return {
    blockSize,
    stored: (hashes, parent, tokenIds, words) => {
      for (const sink of sinks) sink.stored(hashes, parent, tokenIds, words);
    },
    // A run goes by range to the sinks that take one; the others share one set of arrays, built only if one of them needs it.
    storedRun: (hashes, from, to, tokens, words) => {
      let run: StoredArrays | null = null;
      // stored() takes the run's words without the parent's pair.
      let runWords: HashWords | undefined;
      for (const sink of sinks) {
        if (sink.storedRun !== undefined) {
          sink.storedRun(hashes, from, to, tokens, words);
          continue;
        }
        if (run === null) {
          run = storedRunArrays(hashes, from, to, tokens, blockSize);
          runWords = words?.slice(2, 2 * (to - from + 1));
        }
        sink.stored(run.hashes, run.parent, run.tokenIds, runWords);
      }
    },
    removed: (hash) => {
      for (const sink of sinks) sink.removed(hash);
    },
    removedWords: (hash, high, low) => {
      for (const sink of sinks) {
        if (sink.removedWords !== undefined) sink.removedWords(hash, high, low);
        else sink.removed(hash);
      }
    },
    cleared: () => {
      for (const sink of sinks) sink.cleared();
    },
  };
}
